#!/usr/bin/python3
"""End-to-end checks of `ftx smoothquant` against tests/reference/smoothquant_reference.py (float64
PyTorch, TensorRT-LLM's capture/smooth/generate_int8/write_int8 written from the formulas).

Usage: smoothquant_test.py {reference|ranges|arch|gqa|errors|convert}
  reference: GPT-2 fixture (fp16 files). Calibrated ranges vs float64 forward: 1e-5 relative.
             Given ftx's ranges: smoothed fp32 weights within 1e-6 relative, fp16 weights equal,
             int8 files equal except values whose unrounded quantity lies within 1e-4 of a .5
             rounding boundary, scale files within 1e-6 relative; at TP 1, 2 and 4 (the split
             equals write_int8's), from a TP-1 and from a TP-2 input folder (same bytes);
             --calibrate-kv-cache alone; manifest and config.ini; --format ft (FasterTransformer's
             OPT W8A8 files) at TP 1 fp32, TP 2 fp16 and TP 4 fp16; the default LAMBADA data.
  ranges:    calibrated ranges of GPT-2, Megatron, GPT-J, GPT-NeoX, BLOOM and OPT-post fixtures vs
             float64 forward hooks on the fixtures' logical models (tests/reference/gpt_reference.py):
             1e-4 relative.
  arch:      GPT-J (one shared LN), GPT-NeoX (parallel residual, two LNs), BLOOM and OPT-post (no
             smoothing): the smoothed folder gives the original's greedy tokens.
  gqa:       the Llama family (grouped-query and multi-query attention, SwiGLU, RMSNorm; convert-hf
             of tests/fixtures/hf5): ranges, smoothing and INT8 files as `reference`, at TP 1 and 2
             (test_gqa says what); Q25: Mistral calibrated past its sliding window runs the
             windowed model (ranges equal the windowed reference's, not full attention's) and says so.
  errors:    bad alpha, nothing to do, --format ft without alpha or for GPT-J, a gated FFN or
             multi-query attention, missing model, empty/malformed calibration data (a token id
             outside the vocabulary too), existing output: exit codes, one-line messages, no output.
  convert:   convert-hf --smoothquant --calibrate-kv-cache gives the files of convert-hf then
             smoothquant, keeps the converter's config.ini keys; a bad alpha leaves nothing.
Environment: FTX_BIN, FTX_FIXTURES (engine fixtures in $FTX_FIXTURES/engine, converter fixtures in
$FTX_FIXTURES/convert).
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import torch

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.normpath(os.path.join(E2E, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, E2E)  # e2e_util
import smoothquant_reference as ref  # noqa: E402
from e2e_util import check, finish  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "engine")


def sq(args):
    return subprocess.run([FTX, "smoothquant"] + args, capture_output=True, text=True)


def sq_ok(args):
    r = sq(args)
    if r.returncode != 0:
        print(r.stderr)
        raise SystemExit(f"ftx smoothquant {' '.join(args)} failed")
    return r


def calib_file(tmp, n=12, vocab=301, seed=7):
    rnd = random.Random(seed)
    samples = [[rnd.randrange(vocab) for _ in range(rnd.randrange(3, 60))] for _ in range(n)]
    path = os.path.join(tmp, "calib.jsonl")
    with open(path, "w") as f:
        for s in samples:
            f.write(json.dumps({"ids": s}) + "\n")
    return path, samples


def ranges_of(path):
    with open(path) as f:
        j = json.load(f)
    return {k: {n: torch.tensor(v[n], dtype=torch.float64) for n in "xyw"} for k, v in j["gemms"].items()}


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-30))) if a.size else 0.0


def side_files(folder):
    return sorted(f for f in os.listdir(folder) if ".weight.int8." in f or ".scale" in f)


def compare_int8(folder, expected, unrounded, tp, label, c):
    """Every int8/scale file of `folder` against the reference's (c: the model's config section, for
    how QKV splits); returns the count of int8 values excused as rounding ties."""
    check(side_files(folder) == sorted(expected), f"{label}: side files {side_files(folder)[:4]}... != reference's")
    ties = 0
    for name, want in expected.items():
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        got = np.fromfile(path, dtype=want.dtype)
        check(got.size == want.size, f"{label}: {name} has {got.size} values, reference {want.size}")
        if got.size != want.size:
            continue
        if want.dtype == np.int8:
            diff = got != want.reshape(-1)
            if diff.any():
                # Rank r's part of the unrounded values, split like the file.
                stem = name.split(".weight.int8")[0]
                per_col = ".int8.col." in name
                u = unrounded[stem][1 if per_col else 0]
                rank = int(name.split(".")[-2])
                part = ref.rank_part(stem + ".weight", u, c, tp, rank).reshape(-1)
                frac = np.abs(np.abs(part[diff]) % 1.0 - 0.5)
                near = frac < 1e-4
                ties += int(diff.sum())
                check(near.all() and (np.abs(got[diff].astype(int) - want.reshape(-1)[diff].astype(int)) <= 1).all(),
                      f"{label}: {name}: {int((~near).sum())} int8 values differ away from a rounding tie")
        else:
            e = rel_err(got, want.reshape(-1))
            check(e <= 1e-6, f"{label}: {name} relative error {e:.3g} > 1e-6")
    return ties


def weight_files(folder):
    return sorted(f for f in os.listdir(folder) if f.startswith("model.") and f not in side_files(folder))


def expected_weights(T, tp, dtype, c):
    """{file: values} of the floating-point weights written for `tp` ranks."""
    out = {}
    for name, t in T.items():
        a = ref.stored(t, dtype)
        if ref.is_split(name):
            for r in range(tp):
                out[f"{name}.{r}.bin"] = ref.rank_part(name, a, c, tp, r)
        else:
            out[f"{name}.bin"] = a
    return out


def compare_weights(folder, T, tp, dtype, label, tol, c):
    exp = expected_weights(T, tp, dtype, c)
    check(weight_files(folder) == sorted(exp), f"{label}: weight files differ from the reference's")
    worst = 0.0
    for name, want in exp.items():
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        got = np.fromfile(path, dtype=want.dtype).astype(np.float64)
        w = want.reshape(-1).astype(np.float64)
        if tol == 0:
            check(np.array_equal(got, w), f"{label}: {name} differs from the reference")
        else:
            e = rel_err(got, w)
            worst = max(worst, e)
            check(e <= tol, f"{label}: {name} relative error {e:.3g} > {tol}")
    return worst


def test_reference():
    gpt2 = os.path.join(FIX, "gpt2")
    with tempfile.TemporaryDirectory() as tmp:
        calib, samples = calib_file(tmp)
        seq_len = 40
        rpath = os.path.join(tmp, "ranges.json")
        out1 = os.path.join(tmp, "o1")
        r = sq_ok(["-i", f"{gpt2}/1-gpu", "-o", out1, "-g", "1", "-t", "fp32", "--alpha", "0.5",
                   "--calib-data", calib, "--calib-seq-len", str(seq_len), "--save-act-ranges", rpath])
        check("calibrate: 12/12 samples" in r.stderr, "progress line on stderr: " + r.stderr[-200:])

        # 1. Calibrated ranges against float64 forward hooks on the same (truncated) tokens.
        c, T0 = ref.read_tp1_folder(f"{gpt2}/1-gpu")
        R_ref = ref.capture_ranges(c, T0, [s[:seq_len] for s in samples])
        R = ranges_of(rpath)
        check(sorted(R) == sorted(R_ref), "range keys")
        worst = 0.0
        for k in R_ref:
            for n in "xyw":
                e = rel_err(R[k][n].numpy(), R_ref[k][n].numpy())
                worst = max(worst, e)
                check(e <= 1e-5, f"range {k}.{n}: relative error {e:.3g} > 1e-5")
        print(f"act ranges: worst relative error {worst:.3g} over {len(R)} GEMMs (tolerance 1e-5)")

        # 2. Given ftx's ranges: smoothing, floating-point weights and INT8 files.
        for tp, dtype, src, label in ((1, "fp32", "1-gpu", "tp1-fp32"), (2, "fp16", "1-gpu", "tp2-fp16"),
                                     (2, "fp16", "2-gpu", "tp2-fp16-from-2gpu"), (4, "fp32", "1-gpu", "tp4-fp32")):
            if label == "tp1-fp32":
                out = out1
            else:
                out = os.path.join(tmp, label)
                args = ["-i", f"{gpt2}/{src}", "-o", out, "-g", str(tp), "-t", dtype, "--alpha", "0.5", "-q"]
                if src == "1-gpu":
                    sq_ok(args + ["--act-ranges", rpath])
                else:  # calibrates the unsplit copy of a TP-2 folder: the same ranges
                    r2 = os.path.join(tmp, "ranges2.json")
                    sq_ok(args + ["--calib-data", calib, "--calib-seq-len", str(seq_len), "--save-act-ranges", r2])
                    R2 = ranges_of(r2)
                    check(all(torch.equal(R2[k][n], R[k][n]) for k in R for n in "xyw"),
                          "ranges from the TP-2 folder differ from the TP-1 folder's")
            folder = os.path.join(out, f"{tp}-gpu")
            T = {k: v.clone() for k, v in T0.items()}
            Rs = {k: {n: v.clone() for n, v in d.items()} for k, d in R.items()}
            ref.smooth(c, T, Rs, 0.5)
            w_err = compare_weights(folder, T, tp, dtype, label, 1e-6 if dtype == "fp32" else 0, c)
            ties = compare_int8(folder, ref.int8_files(c, T, Rs, tp, dtype), ref.unrounded_int8(c, T, Rs, dtype), tp, label, c)
            print(f"{label}: smoothed weights worst relative error {w_err:.3g}; int8 values at rounding ties: {ties}")
            with open(os.path.join(folder, "manifest.json")) as f:
                man = json.load(f)
            listed = {e["file"]: e for e in man["files"]}
            on_disk = sorted(f for f in os.listdir(folder) if f.startswith("model."))
            check(sorted(listed) == on_disk, f"{label}: manifest lists {len(listed)} files, folder has {len(on_disk)}")
            check(all(os.path.getsize(os.path.join(folder, f)) == e["bytes"] for f, e in listed.items()),
                  f"{label}: manifest sizes")
            check(all(e["dtype"] == "int8" for f, e in listed.items() if ".int8." in f), f"{label}: int8 dtype in manifest")
            with open(os.path.join(folder, "config.ini")) as f:
                ini = f.read()
            for line in ("smoothquant = 0.5", "int8_format = trt-llm", f"tensor_para_size = {tp}",
                         f"weight_data_type = {dtype}", "calibrate_kv_cache = False"):
                check(line in ini, f"{label}: config.ini lacks '{line}'")
        # `ftx inspect` lists the side files with the dtype and shape manifest.json gives them.
        ins = subprocess.run([FTX, "inspect", "--json", "--stats", os.path.join(out1, "1-gpu")], capture_output=True,
                             text=True)
        rows = {j["name"]: j for j in map(json.loads, ins.stdout.splitlines())} if ins.returncode == 0 else {}
        q = rows.get("model.layers.0.attention.query_key_value.weight.int8.0", {})
        check(q.get("dtype") == "int8" and q.get("max") == 127.0, f"inspect of an int8 file: {q}")
        sc = rows.get("model.layers.0.attention.query_key_value.scale_w_quant_orig", {})
        check(sc.get("dtype") == "float32" and len(sc.get("shape", [])) == 2, f"inspect of a scale file: {sc}")
        a, b = os.path.join(tmp, "tp2-fp16", "2-gpu"), os.path.join(tmp, "tp2-fp16-from-2gpu", "2-gpu")
        same = all(open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read()
                   for f in os.listdir(a) if f.startswith("model."))
        check(same, "TP-2 output from a TP-2 input folder differs from the one from a TP-1 folder")

        # 3. --calibrate-kv-cache alone: the input weights unchanged, only the QKV output scale.
        kv = os.path.join(tmp, "kv")
        sq_ok(["-i", f"{gpt2}/1-gpu", "-o", kv, "-g", "2", "-t", "fp16", "--calibrate-kv-cache", "--act-ranges", rpath, "-q"])
        folder = os.path.join(kv, "2-gpu")
        compare_weights(folder, T0, 2, "fp16", "kv-only", 0, c)
        compare_int8(folder, ref.int8_files(c, T0, R, 2, "fp16", kv_only=True), {}, 2, "kv-only", c)
        with open(os.path.join(folder, "config.ini")) as f:
            ini = f.read()
        check("calibrate_kv_cache = True" in ini and "smoothquant = None" in ini, "kv-only config.ini keys")

        # 4. α = 0 and 1 (edges of the range) against the reference.
        for alpha in (0.0, 1.0):
            out = os.path.join(tmp, f"a{alpha}")
            sq_ok(["-i", f"{gpt2}/1-gpu", "-o", out, "--alpha", str(alpha), "--act-ranges", rpath, "-q"])
            T = {k: v.clone() for k, v in T0.items()}
            Rs = {k: {n: v.clone() for n, v in d.items()} for k, d in R.items()}
            ref.smooth(c, T, Rs, alpha)
            compare_weights(os.path.join(out, "1-gpu"), T, 1, "fp32", f"alpha {alpha}", 1e-6, c)
            compare_int8(os.path.join(out, "1-gpu"), ref.int8_files(c, T, Rs, 1, "fp32"),
                         ref.unrounded_int8(c, T, Rs, "fp32"), 1, f"alpha {alpha}", c)

        # 5. --format ft: FasterTransformer's OPT W8A8 files, TP 1 fp32, TP 2 fp16 and TP 4 fp16.
        for tp, dtype in ((1, "fp32"), (2, "fp16"), (4, "fp16")):
            out = os.path.join(tmp, f"ft{tp}")
            sq_ok(["-i", f"{gpt2}/1-gpu", "-o", out, "-g", str(tp), "-t", dtype, "--alpha", "0.5", "--format", "ft",
                   "--act-ranges", rpath, "-q"])
            T = {k: v.clone() for k, v in T0.items()}
            Rs = {k: {n: v.clone() for n, v in d.items()} for k, d in R.items()}
            ref.smooth(c, T, Rs, 0.5)
            folder = os.path.join(out, f"{tp}-gpu")
            compare_weights(folder, T, tp, dtype, f"ft tp{tp}", 1e-6 if dtype == "fp32" else 0, c)
            ties = compare_int8(folder, ref.ft_int8_files(c, T, Rs, tp, dtype), ref.ft_unrounded_int8(c, T, Rs, dtype),
                                tp, f"ft tp{tp}", c)
            print(f"--format ft tp{tp} {dtype}: int8 values at rounding ties: {ties}")
            check("int8_format = ft" in open(os.path.join(folder, "config.ini")).read(), "config.ini int8_format = ft")

        # 6. Default calibration data (LAMBADA texts, the model's tokenizer) equals the same texts
        #    given as ids (tokenized by `ftx tokenize`), each truncated to --calib-seq-len.
        bpe = os.path.join(FIX, "gpt2_bpe", "1-gpu")
        lam = os.path.join(SRC, "data", "lambada", "lambada_test.jsonl")
        with open(lam) as f:
            texts = [f.readline() for _ in range(3)]
        tok = subprocess.run([FTX, "tokenize", "--tokenizer", bpe], input="".join(texts), capture_output=True, text=True)
        if tok.returncode != 0:
            tok = subprocess.run([FTX, "tokenize", "-m", bpe], input="".join(texts), capture_output=True, text=True)
        check(tok.returncode == 0, "ftx tokenize: " + tok.stderr)
        ids_file = os.path.join(tmp, "lam_ids.jsonl")
        with open(ids_file, "w") as f:
            f.write(tok.stdout)
        ra, rb = os.path.join(tmp, "ra.json"), os.path.join(tmp, "rb.json")
        sq_ok(["-i", bpe, "-o", os.path.join(tmp, "la"), "--alpha", "0.5", "--calib-samples", "3", "--calib-seq-len", "48",
               "--save-act-ranges", ra, "-q"])
        sq_ok(["-i", bpe, "-o", os.path.join(tmp, "lb"), "--alpha", "0.5", "--calib-data", ids_file,
               "--calib-seq-len", "48", "--save-act-ranges", rb, "-q"])
        check(ranges_of(ra).keys() == ranges_of(rb).keys() and
              all(torch.equal(ranges_of(ra)[k][n], ranges_of(rb)[k][n]) for k in ranges_of(ra) for n in "xyw"),
              "default LAMBADA calibration differs from the same texts given as ids")
        check(os.path.exists(os.path.join(tmp, "la", "1-gpu", "vocab.json")), "tokenizer files copied to the output")


def greedy(tmp, model_dir, name):
    prompts = os.path.join(tmp, "p.csv")
    with open(prompts, "w") as f:
        f.write("1,2,3,4\n17,5\n")
    out = os.path.join(tmp, name + ".jsonl")
    r = subprocess.run([FTX, "generate", "-m", model_dir, "--input-ids", prompts, "--max-new-tokens", "8",
                        "--output", out, "--force"], capture_output=True, text=True)
    check(r.returncode == 0, f"generate {model_dir}: {r.stderr.strip()}")
    if r.returncode != 0:
        return None
    with open(out) as f:
        return [json.loads(l)["output_ids"] for l in f]


def test_arch():
    with tempfile.TemporaryDirectory() as tmp:
        calib, _ = calib_file(tmp, n=6, vocab=300)
        for model in ("gptj", "gptneox", "bloom", "opt_post"):
            src = os.path.join(FIX, model, "1-gpu")
            out = os.path.join(tmp, model)
            r = sq(["-i", src, "-o", out, "--alpha", "0.8", "--calib-data", calib, "--calib-seq-len", "32", "-q"])
            check(r.returncode == 0, f"{model}: {r.stderr.strip()}")
            if r.returncode != 0:
                continue
            a, b = greedy(tmp, src, model + "_orig"), greedy(tmp, os.path.join(out, "1-gpu"), model + "_sq")
            check(a is not None and a == b, f"{model}: smoothed model's greedy tokens {b} != original {a}")
            ln = np.fromfile(os.path.join(out, "1-gpu", "model.layers.0.input_layernorm.weight.bin"), np.float32)
            cfg = open(os.path.join(src, "config.ini")).read()
            dt = np.float16 if "weight_data_type = fp16" in cfg else np.float32
            ln0 = np.fromfile(os.path.join(src, "model.layers.0.input_layernorm.weight.bin"), dt).astype(np.float32)
            smoothed = not np.array_equal(ln, ln0)
            check(smoothed == (model != "opt_post"),
                  f"{model}: input layernorm {'changed' if smoothed else 'unchanged'} (post-LN must stay, others smooth)")
            print(f"{model}: greedy tokens equal after smoothing; layernorm {'smoothed' if smoothed else 'unchanged'}")


def test_convert():
    """convert-hf --smoothquant/--calibrate-kv-cache = convert-hf (TP 1, fp32) then smoothquant."""
    hf = os.path.join(os.environ["FTX_FIXTURES"], "convert", "hf_gpt2_bin", "model")
    with tempfile.TemporaryDirectory() as tmp:
        calib, _ = calib_file(tmp, n=5, vocab=128)
        common = ["--calib-data", calib, "--calib-seq-len", "12"]
        a, b, c = (os.path.join(tmp, n) for n in "abc")
        r = subprocess.run([FTX, "convert-hf", "-i", hf, "-o", a, "-g", "2", "-t", "fp16", "--smoothquant", "0.5",
                            "--calibrate-kv-cache", "-q"] + common, capture_output=True, text=True)
        check(r.returncode == 0, "convert-hf --smoothquant: " + r.stderr.strip())
        subprocess.run([FTX, "convert-hf", "-i", hf, "-o", b, "-q"], check=True)
        sq_ok(["-i", os.path.join(b, "1-gpu"), "-o", c, "-g", "2", "-t", "fp16", "--alpha", "0.5",
               "--calibrate-kv-cache", "-q"] + common)
        fa, fc = os.path.join(a, "2-gpu"), os.path.join(c, "2-gpu")
        names = sorted(f for f in os.listdir(fc) if f.startswith("model."))
        check(sorted(f for f in os.listdir(fa) if f.startswith("model.")) == names, "convert-hf --smoothquant: file list")
        check(all(open(os.path.join(fa, f), "rb").read() == open(os.path.join(fc, f), "rb").read() for f in names),
              "convert-hf --smoothquant differs from convert-hf then smoothquant")
        check(os.listdir(a) == ["2-gpu"], f"temporary folder left in the output: {os.listdir(a)}")
        check("n_inner = 96" in open(os.path.join(fc, "config.ini")).read(),
              "smoothquant keeps the input config.ini's converter keys")
        ini = open(os.path.join(fa, "config.ini")).read()
        check("smoothquant = 0.5" in ini and "calibrate_kv_cache = True" in ini and "n_inner = 96" in ini,
              "convert-hf --smoothquant config.ini keeps the converter's keys and records the quantization")
        r = subprocess.run([FTX, "convert-hf", "-i", hf, "-o", os.path.join(tmp, "d"), "--smoothquant", "2"] + common,
                           capture_output=True, text=True)
        check(r.returncode == 2 and "outside [0, 1]" in r.stderr and not os.path.exists(os.path.join(tmp, "d", "1-gpu")),
              f"convert-hf --smoothquant 2: {r.returncode} {r.stderr.strip()}")
        print(f"convert-hf --smoothquant: {len(names)} files equal to convert-hf + smoothquant")


def reference_ranges_arch(name, samples):
    """Float64 forward hooks on the logical fixture model (scripts/fixtures/make_engine_models.py,
    tests/reference/gpt_reference.py): reference_ranges of its weights."""
    sys.path.insert(0, os.path.join(SRC, "scripts", "fixtures"))
    import make_engine_models as mem
    m = mem.MODELS[name]
    W = mem.make_weights(m, torch.Generator().manual_seed(1234 + list(mem.MODELS).index(name)))
    return reference_ranges(mem.ref_cfg(m), W, samples, neox_sum=m["arch"] == "gptneox" and m.get("parallel", False))


def reference_ranges(cfg, W, samples, neox_sum=False):
    """Float64 forward hooks on the logical model (cfg, W) of tests/reference/gpt_reference.py: x, y
    (with the GEMM's bias), w per GEMM, QKV = [Q | K | V], a gated FFN's gate projection its own.
    GPT-NeoX with parallel residual (neox_sum): FT keeps one summed output bias, added after FC2,
    so there y of attention.dense has no bias and y of FC2 has both (the definition ftx documents).
    cfg's sliding_window, when there is one, limits the attention as the model does."""
    import gpt_reference as gref
    roles = {}
    for l, L in enumerate(W["layers"]):
        p = f"model.layers.{l}."
        for k, seg in (("wq", 0), ("wk", 1), ("wv", 2)):
            roles[id(L[k])] = (p + "attention.query_key_value", seg)
        roles[id(L["wo"])] = (p + "attention.dense", None)
        roles[id(L["w1"])] = (p + "mlp.dense_h_to_4h", None)
        if L.get("wg") is not None:
            roles[id(L["wg"])] = (p + "mlp.dense_h_to_4h.gate", None)
        roles[id(L["w2"])] = (p + "mlp.dense_4h_to_h", None)
    R, qkv_parts = {}, {}
    orig = gref._lin

    def lin(x, w, b):
        y = orig(x, w, b)
        if id(w) not in roles:
            return y
        key, seg = roles[id(w)]
        y_rec = y
        if neox_sum and key.endswith("attention.dense"):
            y_rec = x @ w
        if neox_sum and key.endswith("dense_4h_to_h"):
            bo = [L["bo"] for L in W["layers"] if L["w2"] is w][0]
            y_rec = y + bo
        if seg is not None:
            qkv_parts.setdefault(key, {})[seg] = (x, y_rec, w)
            if len(qkv_parts[key]) < 3:
                return y
            parts = qkv_parts.pop(key)
            x_, y_rec, w_ = parts[0][0], torch.cat([parts[i][1] for i in range(3)], -1), torch.cat([parts[i][2] for i in range(3)], -1)
        else:
            x_, w_ = x, w
        r = R.setdefault(key, {})
        for k, v in (("x", x_), ("y", y_rec)):
            mx = v.abs().amax(dim=0)
            r[k] = torch.maximum(r[k], mx) if k in r else mx
        r["w"] = w_.abs().clamp(min=1e-8).amax(dim=0)
        return y

    gref._lin = lin
    try:
        for ids in samples:
            gref.forward(cfg, W, ids, window=cfg.get("sliding_window", 0))
    finally:
        gref._lin = orig
    return R


def test_ranges():
    with tempfile.TemporaryDirectory() as tmp:
        calib, samples = calib_file(tmp, n=6, vocab=300)
        for name in ("gpt2", "megatron", "gptj", "gptneox", "bloom", "opt_post"):
            rpath = os.path.join(tmp, name + ".json")
            sq_ok(["-i", os.path.join(FIX, name, "1-gpu"), "-o", os.path.join(tmp, name), "--calibrate-kv-cache",
                   "--calib-data", calib, "--calib-seq-len", "32", "--save-act-ranges", rpath, "-q"])
            compare_ranges(name, ranges_of(rpath), reference_ranges_arch(name, [s[:32] for s in samples]))


def compare_ranges(name, got, want):
    """ftx's calibrated ranges against the float64 reference's: the same GEMMs, 1e-4 relative."""
    check(sorted(got) == sorted(want), f"{name}: GEMM keys {sorted(got)[:5]} vs {sorted(want)[:5]}")
    worst = 0.0
    for k in want:
        for n in "xyw":
            if k in got:
                e = rel_err(got[k][n].numpy(), want[k][n].numpy())
                worst = max(worst, e)
                check(e <= 1e-4, f"{name}: {k}.{n} relative error {e:.3g} > 1e-4")
    print(f"{name}: activation ranges of {len(want)} GEMMs, worst relative error {worst:.3g} (tolerance 1e-4)")


HF5 = os.path.join(SRC, "tests", "fixtures", "hf5")


def convert_hf5(name, out, tp, flags=()):
    """`ftx convert-hf` of the transformers-5 checkpoint tests/fixtures/hf5/NAME (fp32) -> out/<tp>-gpu."""
    subprocess.run([FTX, "convert-hf", "-i", os.path.join(HF5, name, "safetensors"), "-o", out, "-g", str(tp),
                    "-t", "fp32", "-q", *flags], check=True)
    return os.path.join(out, f"{tp}-gpu")


def test_gqa():
    """The Llama family (checkpoints of tests/fixtures/hf5 converted by convert-hf): Llama (GQA, 2 of 4
    KV heads, untied, llama3 rope), Qwen2 (GQA with Q/K/V biases, tied), Mistral (one KV head,
    sliding window 6) and Phi-3 (fused projections taken apart, partial longrope; calibrated on 32
    tokens, its original_max_position_embeddings). Calibrated ranges (the gate projection's too) against float64 forward hooks
    on transformers' weights (tests/reference/hf_arch_reference.py): 1e-4 relative. Given ftx's
    ranges: smoothed weights (RMSNorm gamma; FC1 and gate with one s) within 1e-6 (fp32) or equal
    (fp16), the INT8 files equal TensorRT-LLM's (QKV per-tensor scales one per Q, K and V of their
    own widths; each rank its part of Q, K and V) except values at rounding ties, at TP 1 fp32, TP 2
    fp16, from a TP-2 input folder (the same bytes), and --calibrate-kv-cache alone; Llama at TP 4,
    its 2 KV heads copied per rank (gqa_copies)."""
    import hf_arch_reference
    with tempfile.TemporaryDirectory() as tmp:
        calib, samples = calib_file(tmp, n=6, vocab=64)
        seq_len = 32
        for name in ("llama", "qwen2", "mistral", "phi3_longrope"):
            src1 = convert_hf5(name, os.path.join(tmp, name + "-ft"), 1)
            src2 = convert_hf5(name, os.path.join(tmp, name + "-ft"), 2)
            rpath = os.path.join(tmp, name + ".json")
            common = ["--calib-data", calib, "--calib-seq-len", str(seq_len)]
            sq_ok(["-i", src1, "-o", os.path.join(tmp, name + "-o1"), "-t", "fp32", "--alpha", "0.5", "--save-act-ranges",
                   rpath, "-q"] + common)
            cfg, W = hf_arch_reference.build(os.path.join(HF5, name, "safetensors"))
            compare_ranges(name, ranges_of(rpath), reference_ranges(cfg, W, [s[:seq_len] for s in samples]))

            c, T0 = ref.read_tp1_folder(src1)
            R = ranges_of(rpath)
            for tp, dtype, src, label in ((1, "fp32", src1, "tp1-fp32"), (2, "fp16", src1, "tp2-fp16"),
                                         (2, "fp16", src2, "tp2-fp16-from-2gpu")):
                out = os.path.join(tmp, f"{name}-{label}")
                args = ["-i", src, "-o", out, "-g", str(tp), "-t", dtype, "--alpha", "0.5", "-q"]
                if src == src1:
                    sq_ok(args + ["--act-ranges", rpath])
                else:  # calibrates the unsplit copy of a TP-2 folder: the same ranges
                    r2 = os.path.join(tmp, name + "-2.json")
                    sq_ok(args + common + ["--save-act-ranges", r2])
                    R2 = ranges_of(r2)
                    check(all(torch.equal(R2[k][n], R[k][n]) for k in R for n in "xyw"),
                          f"{name}: ranges from the TP-2 folder differ from the TP-1 folder's")
                folder = os.path.join(out, f"{tp}-gpu")
                T = {k: v.clone() for k, v in T0.items()}
                Rs = {k: {n: v.clone() for n, v in d.items()} for k, d in R.items()}
                ref.smooth(c, T, Rs, 0.5)
                w_err = compare_weights(folder, T, tp, dtype, f"{name} {label}", 1e-6 if dtype == "fp32" else 0, c)
                ties = compare_int8(folder, ref.int8_files(c, T, Rs, tp, dtype), ref.unrounded_int8(c, T, Rs, dtype), tp,
                                    f"{name} {label}", c)
                ini = open(os.path.join(folder, "config.ini")).read()
                check(f"kv_head_num = {c['kv_head_num']}" in ini and "smoothquant = 0.5" in ini,
                      f"{name} {label}: config.ini keeps kv_head_num and records smoothquant")
                print(f"{name} {label}: smoothed weights worst relative error {w_err:.3g}; "
                      f"int8 values at rounding ties: {ties}")
            a, b = os.path.join(tmp, f"{name}-tp2-fp16", "2-gpu"), os.path.join(tmp, f"{name}-tp2-fp16-from-2gpu", "2-gpu")
            check(all(open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read()
                      for f in os.listdir(a) if f.startswith("model.")),
                  f"{name}: TP-2 output from a TP-2 input folder differs from the one from a TP-1 folder")
            kv = os.path.join(tmp, name + "-kv")
            sq_ok(["-i", src1, "-o", kv, "-g", "2", "-t", "fp32", "--calibrate-kv-cache", "--act-ranges", rpath, "-q"])
            compare_weights(os.path.join(kv, "2-gpu"), T0, 2, "fp32", f"{name} kv-only", 0, c)
            compare_int8(os.path.join(kv, "2-gpu"), ref.int8_files(c, T0, R, 2, "fp32", kv_only=True), {}, 2,
                         f"{name} kv-only", c)
            if name == "llama":
                gqa_copies(tmp, src1, rpath, c, T0, R)
                # Neither divides the other: 2 KV heads for 3 ranks; FT's files for grouped-query attention.
                for args, text in ((["-g", "3"], "kv_head_num 2 does not divide the tensor parallel size 3"),
                                   (["--format", "ft"], "multi-head attention only")):
                    out = os.path.join(tmp, "never")
                    r = sq(["-i", src1, "-o", out, "--alpha", "0.5", "--act-ranges", rpath] + args)
                    lines = r.stderr.strip().splitlines()
                    check(r.returncode == 1 and len(lines) == 1 and text in lines[0] and not os.path.exists(out),
                          f"llama {args}: exit {r.returncode}, {r.stderr.strip()!r} (want one line with {text!r})")
        test_Q25_calibration_runs_the_sliding_window(tmp)


def test_Q25_calibration_runs_the_sliding_window(tmp):
    """Mistral (sliding_window 6) calibrated on samples of up to 32 tokens: the ranges are those of
    the model's windowed attention (float64 reference with the window, 1e-4) and not those of full
    attention (the window changes them), and stderr says so in one line."""
    import hf_arch_reference
    calib, samples = calib_file(tmp, n=6, vocab=64, seed=25)
    src = convert_hf5("mistral", os.path.join(tmp, "q25-ft"), 1)
    rpath = os.path.join(tmp, "q25.json")
    r = sq_ok(["-i", src, "-o", os.path.join(tmp, "q25-out"), "--calibrate-kv-cache", "--calib-data", calib,
               "--calib-seq-len", "32", "--save-act-ranges", rpath])
    longest = max(len(s[:32]) for s in samples)
    note = (f"ftx smoothquant: calibration samples of up to {longest} tokens attend over the model's sliding window "
            "of 6 positions (config.ini sliding_window), as generate --memory-len 6 runs them")
    check(note in r.stderr.splitlines(), f"Q25: stderr does not say {note!r}: {r.stderr!r}")
    cfg, W = hf_arch_reference.build(os.path.join(HF5, "mistral", "safetensors"))
    check(cfg["sliding_window"] == 6, f"Q25: the mistral fixture's window is {cfg['sliding_window']}, not 6")
    got = ranges_of(rpath)
    compare_ranges("Q25 mistral, window 6", got, reference_ranges(cfg, W, [s[:32] for s in samples]))
    full = reference_ranges(dict(cfg, sliding_window=0), W, [s[:32] for s in samples])
    worst = max(rel_err(got[k][n].numpy(), full[k][n].numpy()) for k in full for n in "xy" if k in got)
    check(worst > 1e-2, f"Q25: ranges with and without the window differ by only {worst:.3g}: the window is not exercised")
    print(f"Q25: full attention would give ranges up to {worst:.3g} (relative) away; ftx calibrates the windowed model")


def gqa_copies(tmp, src1, rpath, c, T0, R):
    """TP 4 of Llama's 2 KV heads: each copied to the two ranks whose query heads use it. Unsmoothed
    (--calibrate-kv-cache) the weight files are convert-hf -g 4's byte for byte and config.ini says
    kv_head_num 4, source_kv_head_num 2; with --alpha the weights and INT8 files are the reference's
    of the copied model (smoothquant_reference.copy_kv_heads)."""
    kv4 = os.path.join(tmp, "llama-kv4")
    sq_ok(["-i", src1, "-o", kv4, "-g", "4", "-t", "fp32", "--calibrate-kv-cache", "--act-ranges", rpath, "-q"])
    conv4 = convert_hf5("llama", os.path.join(tmp, "llama-ft"), 4)
    a = os.path.join(kv4, "4-gpu")
    names = sorted(f for f in os.listdir(conv4) if f.startswith("model.") and f.endswith(".bin"))
    check(all(open(os.path.join(a, f), "rb").read() == open(os.path.join(conv4, f), "rb").read() for f in names),
          "llama -g 4: weight files differ from convert-hf -g 4's (K/V heads copied per rank)")
    ini = open(os.path.join(a, "config.ini")).read()
    check("kv_head_num = 4" in ini and "source_kv_head_num = 2" in ini, "llama -g 4: config.ini's K/V head keys")
    out = os.path.join(tmp, "llama-tp4")
    sq_ok(["-i", src1, "-o", out, "-g", "4", "-t", "fp32", "--alpha", "0.5", "--act-ranges", rpath, "-q"])
    T = {k: v.clone() for k, v in T0.items()}
    Rs = {k: {n: v.clone() for n, v in d.items()} for k, d in R.items()}
    ref.smooth(c, T, Rs, 0.5)
    c4, T4, R4 = ref.copy_kv_heads(c, T, Rs, 4)
    folder = os.path.join(out, "4-gpu")
    w_err = compare_weights(folder, T4, 4, "fp32", "llama tp4", 1e-6, c4)
    ties = compare_int8(folder, ref.int8_files(c4, T4, R4, 4, "fp32"), ref.unrounded_int8(c4, T4, R4, "fp32"), 4,
                        "llama tp4", c4)
    print(f"llama TP 4 (2 KV heads copied to 4 ranks): weights as convert-hf -g 4's; smoothed weights worst relative "
          f"error {w_err:.3g}; int8 values at rounding ties: {ties}")


def test_errors():
    gpt2 = os.path.join(FIX, "gpt2", "1-gpu")
    with tempfile.TemporaryDirectory() as tmp:
        calib, _ = calib_file(tmp, n=3)
        empty = os.path.join(tmp, "empty.jsonl")
        open(empty, "w").close()
        bad = os.path.join(tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"ids": [1, 2]}\n{"ids": [1, oops]}\n')
        badid = os.path.join(tmp, "badid.jsonl")
        with open(badid, "w") as f:
            f.write('{"ids": [1, 5000000, 3]}\n')
        notext = os.path.join(tmp, "notext.jsonl")
        with open(notext, "w") as f:
            f.write('{"text": "hello"}\n')
        out = os.path.join(tmp, "out")
        cases = [
            (["-i", gpt2, "-o", out, "--alpha", "1.5", "--calib-data", calib], 2, "--alpha 1.5 is outside [0, 1]"),
            (["-i", gpt2, "-o", out, "--alpha", "-0.1", "--calib-data", calib], 2, "outside [0, 1]"),
            (["-i", gpt2, "-o", out, "--calib-data", calib], 2, "nothing to do"),
            (["-i", os.path.join(tmp, "nope"), "-o", out, "--alpha", "0.5", "--calib-data", calib], 1, "config.ini"),
            (["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", empty], 1, "empty"),
            (["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", bad], 1, "bad.jsonl:2"),
            (["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", notext], 1, "tokenizer"),
            (["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", badid], 1, "badid.jsonl:1: token id 5000000"),
            (["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", calib, "--format", "xyz"], 2, "--format"),
            (["-i", gpt2, "-o", out, "--calibrate-kv-cache", "--format", "ft", "--calib-data", calib], 2, "--alpha"),
            (["-i", os.path.join(FIX, "gptj", "1-gpu"), "-o", out, "--alpha", "0.5", "--format", "ft",
              "--calib-data", calib], 1, "GPT model only"),
            (["-i", os.path.join(FIX, "gptnext", "1-gpu"), "-o", out, "--alpha", "0.5", "--format", "ft",
              "--calib-data", calib], 1, "no gate projection"),
            (["-i", os.path.join(FIX, "santacoder", "1-gpu"), "-o", out, "--alpha", "0.5", "--format", "ft",
              "--calib-data", calib], 1, "multi-head attention only"),
        ]
        for args, code, text in cases:
            r = sq(args)
            lines = r.stderr.strip().splitlines()
            check(r.returncode == code, f"{args}: exit {r.returncode}, expected {code} ({r.stderr.strip()})")
            check(len(lines) == 1 and lines[0].startswith("ftx") and text in lines[0],
                  f"{args}: expected one line naming '{text}', got {r.stderr.strip()!r}")
            left = os.listdir(out) if os.path.exists(out) else []
            check(left == [], f"{args}: output left behind: {left}")
        sq_ok(["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", calib, "-q"])
        r = sq(["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", calib, "-q"])
        check(r.returncode == 1 and "--force" in r.stderr, f"existing output without --force: {r.stderr.strip()}")
        r = sq(["-i", gpt2, "-o", out, "--alpha", "0.5", "--calib-data", calib, "-q", "--force"])
        check(r.returncode == 0, f"--force: {r.stderr.strip()}")
        check(os.listdir(out) == ["1-gpu"], f"only 1-gpu in the output folder: {os.listdir(out)}")


if __name__ == "__main__":
    {"reference": test_reference, "arch": test_arch, "errors": test_errors, "convert": test_convert,
     "ranges": test_ranges, "gqa": test_gqa}[sys.argv[1]]()
    finish("smoothquant e2e")
