#!/usr/bin/env python3
"""End-to-end checks of FP8 (issue 29): `ftx smoothquant --fp8` against the float64 export written
from TensorRT-LLM's formulas (tests/reference/fp8_reference.py), and `--fp8` / `--fp8-kv-cache` in
generate, chat and eval-lambada. Runs under the test venv (FTX_TEST_PYTHON: ml_dtypes).

Usage: fp8_test.py {export|cli|sessions|errors}
  export:   GPT-2 fixture (fp16 files): every FP8 file byte-identical to the reference's, given ftx's
            calibrated ranges, at TP 1 (fp32), TP 2 (fp16, and again from a TP-2 input folder: the
            same bytes) and TP 4 (fp32); the floating-point weights unchanged; manifest dtypes; config.ini
            `fp8 = True`; `ftx inspect` reads the E4M3 files (largest |W| at 448); --fp8 with --alpha 0.5 and --calibrate-kv-cache: the INT8 files as without
            --fp8, and the FP8 files of the smoothed weights the folder holds; --act-ranges reuse; the
            FP8 files of GPT-J, NeoX, BLOOM, OPT-post, GPT-Next (gate projection), SantaCoder
            (multi-query QKV: K and V whole on every rank) and Megatron at TP 1 and 2, byte-identical too,
            and of Llama, Qwen2 and Mistral (convert-hf of tests/fixtures/hf5: grouped-query QKV split per
            Q/K/V, multi-query, SwiGLU) at TP 1 and 2, Llama at TP 4 with its KV heads copied per rank.
            And the K/V ranges ftx records (max |K| after rotary, max |V|) for every one of these
            models, against float64 forwards of the fixtures' logical models: 1e-4 relative.
  cli:      generate --fp8, --fp8-kv-cache and both: greedy output_ids equal the float64 emulation's
            (fp8 fixtures' expected.json) for the seven architectures, the Llama and Qwen2
            checkpoints (grouped-query attention) and Mistral without its window (multi-query) at TP 1, and with both at TP 2 under mpirun and PP 2; beam search runs; eval-lambada and chat run on an FP8 export of a
            model with a tokenizer.
  sessions: session rounds (greedy, seeded top-p, beam 3) give the tokens of one fresh request over
            the whole context with --fp8 --fp8-kv-cache, TP 1 and TP 2.
  errors:   a folder without FP8 files or scales, scales of 0, NaN or -1, a weight file holding a NaN
            code, --fp8 with --int8-mode, --fp8-kv-cache with --int8-kv-cache, a ranges file without
            K/V ranges, smoothquant of a folder whose config.ini gives fewer K/V heads than its QKV
            files hold: one-line errors naming the file or flag, exit 1 (2 for flags), no output.
Environment: FTX_BIN, FTX_FIXTURES.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.normpath(os.path.join(E2E, "..", ".."))
sys.path.insert(0, E2E)  # e2e_util
sys.path.insert(0, os.path.join(E2E, "sessions"))  # sessions_test
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "scripts", "fixtures"))
import fp8_reference as f8  # noqa: E402
import sessions_test  # noqa: E402
import smoothquant_reference as sqref  # noqa: E402
import smoothquant_test  # noqa: E402
from e2e_util import check, finish, run_ftx as ftx  # noqa: E402
from int8_kv_test import generate  # noqa: E402
from smoothquant_test import calib_file, compare_weights, ranges_of, sq, sq_ok  # noqa: E402

# smoothquant_test's weight-file checks count the quantised side files out: the FP8 ones too.
_int8_side_files = smoothquant_test.side_files
smoothquant_test.side_files = lambda folder: sorted(set(_int8_side_files(folder)) |
                                                     {f for f in os.listdir(folder) if f8.is_fp8_file(f)})

FIX = os.path.join(os.environ["FTX_FIXTURES"], "engine")
FP8 = os.path.join(os.environ["FTX_FIXTURES"], "fp8")
MODELS = ["gpt2", "gptj", "gptneox", "bloom", "opt_post", "gptnext", "santacoder"]
MODES = {"fp8": ["--fp8"], "fp8_kv": ["--fp8-kv-cache"], "fp8_both": ["--fp8", "--fp8-kv-cache"]}


def kv_ranges_of(path):
    with open(path) as f:
        return {k: (v["k"], v["v"]) for k, v in json.load(f)["kv"].items()}


def fp8_names(folder):
    return sorted(f for f in os.listdir(folder) if f8.is_fp8_file(f))


def compare_fp8(folder, expected, label):
    """Every FP8 file of `folder` byte for byte against the reference's."""
    check(fp8_names(folder) == sorted(expected), f"{label}: FP8 files {fp8_names(folder)[:4]}... != reference's "
                                                 f"{sorted(expected)[:4]}...")
    differ = 0
    for name, want in expected.items():
        path = os.path.join(folder, name)
        if os.path.exists(path) and open(path, "rb").read() != want.tobytes():
            differ += 1
            got = np.fromfile(path, dtype=want.dtype)
            n = int((got != want.reshape(-1)).sum()) if got.size == want.size else -1
            check(False, f"{label}: {name} differs from the reference ({n} elements)")
    return len(expected) - differ


def test_export():
    gpt2 = os.path.join(FIX, "gpt2")
    with tempfile.TemporaryDirectory() as tmp:
        calib, samples = calib_file(tmp, vocab=300)  # ids every fixture model has
        rpath = os.path.join(tmp, "ranges.json")
        out1 = os.path.join(tmp, "o1")
        sq_ok(["-i", f"{gpt2}/1-gpu", "-o", out1, "-g", "1", "-t", "fp32", "--fp8", "--calib-data", calib,
               "--calib-seq-len", "40", "--save-act-ranges", rpath, "-q"])
        c, T0 = sqref.read_tp1_folder(f"{gpt2}/1-gpu")
        R, kv = ranges_of(rpath), kv_ranges_of(rpath)
        check_kv_ranges("gpt2", rpath, [s[:40] for s in samples])
        check(sorted(kv) == [f"model.layers.{l}.attention" for l in range(int(c["num_layer"]))], f"K/V ranges: {kv}")
        for tp, dtype, src, label in ((1, "fp32", "1-gpu", "tp1-fp32"), (2, "fp16", "1-gpu", "tp2-fp16"),
                                     (2, "fp16", "2-gpu", "tp2-fp16-from-2gpu"), (4, "fp32", "1-gpu", "tp4-fp32")):
            out = out1 if label == "tp1-fp32" else os.path.join(tmp, label)
            if label != "tp1-fp32":
                args = ["-i", f"{gpt2}/{src}", "-o", out, "-g", str(tp), "-t", dtype, "--fp8", "-q"]
                sq_ok(args + (["--act-ranges", rpath] if src == "1-gpu" else
                              ["--calib-data", calib, "--calib-seq-len", "40"]))
            folder = os.path.join(out, f"{tp}-gpu")
            n = compare_fp8(folder, f8.fp8_files(c, T0, R, kv, tp, dtype, sqref.stored), label)
            compare_weights(folder, T0, tp, dtype, label, 0, c)
            with open(os.path.join(folder, "manifest.json")) as f:
                man = {e["file"]: e for e in json.load(f)["files"]}
            check(all(man[f]["dtype"] == ("float8_e4m3fn" if ".weight.fp8." in f else "float32")
                      for f in fp8_names(folder)), f"{label}: manifest dtypes of the FP8 files")
            ini = open(os.path.join(folder, "config.ini")).read()
            check("fp8 = True" in ini and "smoothquant = None" in ini, f"{label}: config.ini keys")
            print(f"{label}: {n} FP8 files byte-identical to the float64 reference (TensorRT-LLM's formulas)")
        # `ftx inspect` reads the E4M3 files as the manifest types them: the largest |W| lands on 448.
        ins = ftx(["inspect", "--json", "--stats", os.path.join(out1, "1-gpu")])
        rows = {j["name"]: j for j in map(json.loads, ins.stdout.splitlines())} if ins.returncode == 0 else {}
        q = rows.get("model.layers.0.attention.query_key_value.weight.fp8.0", {})
        check(q.get("dtype") == "float8_e4m3fn" and max(q.get("max", 0), -q.get("min", 0)) == 448.0,
              f"inspect of an FP8 weight file: {q}")
        a, b = os.path.join(tmp, "tp2-fp16", "2-gpu"), os.path.join(tmp, "tp2-fp16-from-2gpu", "2-gpu")
        check(all(open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read() for f in fp8_names(a)),
              "TP-2 FP8 files from a TP-2 input folder differ from those from a TP-1 folder")

        # With --alpha and --calibrate-kv-cache: the INT8 files are those of a run without --fp8,
        # and the FP8 files quantise the smoothed weights the folder holds, with the smoothed ranges.
        both, plain = os.path.join(tmp, "both"), os.path.join(tmp, "plain")
        common = ["-i", f"{gpt2}/1-gpu", "-g", "2", "-t", "fp32", "--alpha", "0.5", "--calibrate-kv-cache",
                  "--act-ranges", rpath, "-q"]
        sq_ok(common + ["-o", both, "--fp8"])
        sq_ok(common + ["-o", plain])
        fb, fp = os.path.join(both, "2-gpu"), os.path.join(plain, "2-gpu")
        names = sorted(f for f in os.listdir(fp) if f.startswith("model."))
        check(all(open(os.path.join(fb, f), "rb").read() == open(os.path.join(fp, f), "rb").read() for f in names),
              "--fp8 changed the weights or INT8 files of an --alpha run")
        check(sorted(f for f in os.listdir(fb) if f.startswith("model.")) == sorted(names + fp8_names(fb)),
              "--alpha --fp8: the files of --alpha plus the FP8 ones")
        T = {k: v.clone() for k, v in T0.items()}
        Rs = {k: {n: v.clone() for n, v in d.items()} for k, d in R.items()}
        sqref.smooth(c, T, Rs, 0.5)
        # The folder's own smoothed weights (ftx's float64 smoothing rounded to fp32; the reference's
        # may differ by an ulp, which smoothquant_test allows): the FP8 files must quantise these.
        held = os.path.join(tmp, "held")
        sq_ok(["-i", fb, "-o", held, "-g", "1", "-t", "fp32", "--calibrate-kv-cache", "--act-ranges", rpath, "-q"])
        Th = sqref.read_tp1_folder(os.path.join(held, "1-gpu"))[1]
        exp = f8.fp8_files(c, Th, Rs, kv, 2, "fp32", sqref.stored)
        for name, want in exp.items():
            got = np.fromfile(os.path.join(fb, name), dtype=want.dtype)
            if ".activation_scaling_factor." in name:  # the smoothed ranges: float64 x / s on both sides
                check(abs(float(got[0]) - float(want[0])) <= 1.2e-7 * float(want[0]), f"--alpha --fp8: {name}")
            else:
                check(got.tobytes() == want.tobytes(), f"--alpha --fp8: {name} differs from the reference")
        print(f"--alpha 0.5 --calibrate-kv-cache --fp8: the INT8 folder's {len(names)} files unchanged, "
              f"{len(exp)} FP8 files of its smoothed weights as the reference")

        # Every other architecture (GPT-Next's gate projection included), TP 1 and 2.
        for m in MODELS[1:] + ["megatron"]:
            c, T = layer_gemms(os.path.join(FIX, m, "1-gpu"))
            for tp in (1, 2):
                out, rp = os.path.join(tmp, f"{m}{tp}"), os.path.join(tmp, f"{m}.json")
                sq_ok(["-i", os.path.join(FIX, m, "1-gpu"), "-o", out, "-g", str(tp), "-t", "fp32", "--fp8", "-q"] +
                      (["--calib-data", calib, "--calib-seq-len", "40", "--save-act-ranges", rp] if tp == 1
                       else ["--act-ranges", rp]))
                if tp == 1:
                    check_kv_ranges(m, rp, [s[:40] for s in samples])
                n = compare_fp8(os.path.join(out, f"{tp}-gpu"),
                                f8.fp8_files(c, T, ranges_of(rp), kv_ranges_of(rp), tp, "fp32", sqref.stored),
                                f"{m} tp{tp}")
                print(f"{m} TP {tp}: {n} FP8 files byte-identical to the float64 reference")
        export_llama_family(tmp)
        # A split multi-query folder merges back (K and V from rank 0) to the same output.
        again = os.path.join(tmp, "santacoder2again")
        sq_ok(["-i", os.path.join(FIX, "santacoder", "2-gpu"), "-o", again, "-g", "2", "-t", "fp32", "--fp8", "-q",
               "--act-ranges", os.path.join(tmp, "santacoder.json")])
        a, b = os.path.join(tmp, "santacoder2", "2-gpu"), os.path.join(again, "2-gpu")
        names = sorted(f for f in os.listdir(a) if f.startswith("model."))
        check(names == sorted(f for f in os.listdir(b) if f.startswith("model.")) and
              all(open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read() for f in names),
              "santacoder: the TP-2 output from a TP-2 folder differs from the one from a TP-1 folder")


def export_llama_family(tmp):
    """The Llama family (convert-hf of tests/fixtures/hf5): Llama and Qwen2 (grouped-query, 2 of 4 KV
    heads: one per rank at TP 2), Mistral (one KV head, whole on every rank), each with its gate
    projection: the FP8 files byte-identical to the reference at TP 1 and 2, and at TP 4 for Llama
    (its KV heads copied per rank, smoothquant_reference.copy_kv_heads); the K/V ranges against
    float64 forwards of transformers' weights (tests/reference/hf_arch_reference.py)."""
    import hf_arch_reference
    os.makedirs(os.path.join(tmp, "c64"))
    calib, samples = calib_file(os.path.join(tmp, "c64"), vocab=64)
    for m in ("llama", "qwen2", "mistral"):
        src = smoothquant_test.convert_hf5(m, os.path.join(tmp, m + "-ft"), 1)
        c, T = layer_gemms(src)
        rp = os.path.join(tmp, f"{m}.json")
        for tp in (1, 2, 4) if m == "llama" else (1, 2):
            out = os.path.join(tmp, f"{m}{tp}")
            sq_ok(["-i", src, "-o", out, "-g", str(tp), "-t", "fp32", "--fp8", "-q"] +
                  (["--calib-data", calib, "--calib-seq-len", "40", "--save-act-ranges", rp] if tp == 1
                   else ["--act-ranges", rp]))
            if tp == 1:
                check_kv_ranges(m, rp, [s[:40] for s in samples],
                                hf_arch_reference.build(os.path.join(smoothquant_test.HF5, m, "safetensors")))
            ct, Tt = c, T
            if tp > int(c["kv_head_num"]) > 1:
                ct, Tt, _ = sqref.copy_kv_heads(c, T, {}, tp)
            n = compare_fp8(os.path.join(out, f"{tp}-gpu"),
                            f8.fp8_files(ct, Tt, ranges_of(rp), kv_ranges_of(rp), tp, "fp32", sqref.stored), f"{m} tp{tp}")
            print(f"{m} TP {tp}: {n} FP8 files byte-identical to the float64 reference")


def layer_gemms(folder):
    """(config section, {FT weight name: float64 tensor}) of the layer GEMM weights of a TP-1 folder of
    any architecture (all fp8_files reads)."""
    import int8_reference

    c = int8_reference._ini(folder)
    dt = c["weight_data_type"]
    H, I = int(c["head_num"]) * int(c["size_per_head"]), int(c["inter_size"])
    kvd = int(c.get("kv_head_num", c["head_num"])) * int(c["size_per_head"])
    shapes = {"attention.query_key_value": (H, H + 2 * kvd), "attention.dense": (H, H), "mlp.dense_h_to_4h": (H, I),
              "mlp.dense_h_to_4h.gate": (H, I), "mlp.dense_4h_to_h": (I, H)}
    T = {}
    for l in range(int(c["num_layer"])):
        for g, shape in shapes.items():
            name = f"model.layers.{l}.{g}.weight"
            if os.path.exists(os.path.join(folder, name + ".0.bin")):
                T[name] = int8_reference._read(folder, name + ".0.bin", shape, dt)
    return c, T


def kv_reference_ranges(name, samples, model=None):
    """max |K| (after rotary) and max |V| per layer of a logical model in float64: model = (cfg, W),
    or the engine fixture `name`'s."""
    import gpt_reference as gref
    import make_engine_models as mem
    if model is None:
        m = mem.MODELS[name]
        model = mem.ref_cfg(m), mem.make_weights(m, torch.Generator().manual_seed(1234 + list(mem.MODELS).index(name)))
    cfg, W = model
    amax = {}
    second = {}

    def store(layer, t):
        which = 1 if second.get(layer) else 0
        second[layer] = not second.get(layer)
        cur = amax.setdefault(layer, [0.0, 0.0])
        cur[which] = max(cur[which], float(t.abs().max()))
        return t

    for ids in samples:
        gref.forward(cfg, W, ids, kv_store=store, window=cfg.get("sliding_window", 0))
    return {f"model.layers.{l}.attention": tuple(v) for l, v in amax.items()}


def check_kv_ranges(name, rpath, samples, model=None):
    """The K/V ranges ftx recorded in `rpath` against float64 forwards of the logical model (as
    kv_reference_ranges)."""
    got, want = kv_ranges_of(rpath), kv_reference_ranges(name, samples, model)
    check(sorted(got) == sorted(want), f"{name}: K/V range keys {sorted(got)} vs {sorted(want)}")
    worst = 0.0
    for k in want:
        for i in (0, 1):
            e = abs(got[k][i] - want[k][i]) / want[k][i]
            worst = max(worst, e)
            check(e <= 1e-4, f"{name}: {k} {'KV'[i]} range {got[k][i]} vs float64 {want[k][i]}")
    print(f"{name}: K/V ranges of {len(want)} layers, worst relative error {worst:.3g} (tolerance 1e-4)")


def test_cli():
    mpi = shutil.which("mpirun") is not None
    with tempfile.TemporaryDirectory() as tmp:
        for m in MODELS + ["llama", "qwen2", "mistral_mqa"]:  # and the hf5 checkpoints of make_fp8_fixtures.py
            exp = json.load(open(os.path.join(FP8, m, "expected.json")))
            ids = os.path.join(tmp, f"{m}_ids.csv")
            with open(ids, "w") as f:
                f.writelines(",".join(map(str, p)) + "\n" for p in exp["prompts"])
            for mode, flags in MODES.items():
                # TP 2 of every mode is engine_fp8_mpi's (logits against the emulation): here both
                # together at TP 2 and PP 2, each mode at TP 1.
                runs = [(1, 1, 0)] + ([(2, 1, 2), (1, 2, 2)] if mpi and mode == "fp8_both" else [])
                for tp, pp, ranks in runs:
                    grid = ["--tensor-para-size", "1", "--pipeline-para-size", "2"] if pp > 1 else []
                    res, err = generate(tmp, os.path.join(FP8, m, f"{tp}-gpu"), ids, [*flags, *grid], mpi=ranks)
                    if not check(res is not None, f"{m} {mode} tp{tp} pp{pp}: {err.strip()}"):
                        continue
                    want = exp[mode]["greedy"]
                    for i, r in enumerate(res):
                        check(r["output_ids"] == want[i],
                              f"{m} {mode} tp{tp} pp{pp} prompt {i}: {r['output_ids']} != emulation {want[i]}")
            print(f"{m}: --fp8, --fp8-kv-cache and both: greedy tokens equal the emulation at TP 1"
                  f"{', TP 2 and PP 2' if mpi else ''}")
        # Beam search runs with both and is deterministic.
        ids = os.path.join(FIX, "gpt2", "start_ids.csv")
        beams = [generate(tmp, os.path.join(FP8, "gpt2", "1-gpu"), ids, ["--fp8", "--fp8-kv-cache", "--beam-width", "3",
                                                                          "--return-log-probs"])
                 for _ in range(2)]
        if check(all(b[0] is not None for b in beams), f"beam search: {beams[0][1].strip()}"):
            check(beams[0][0] == beams[1][0], "beam search with --fp8 --fp8-kv-cache is not deterministic")
        # A model with a tokenizer: smoothquant --fp8, then text in and out of generate, eval-lambada, chat.
        bpe = os.path.join(FIX, "gpt2_bpe", "1-gpu")
        calib = os.path.join(tmp, "calib.jsonl")
        with open(calib, "w") as f:
            for t in ("the quick brown fox jumps over the lazy dog", "a stitch in time saves nine"):
                f.write(json.dumps({"text": t}) + "\n")
        out = os.path.join(tmp, "bpe")
        r = sq(["-i", bpe, "-o", out, "--fp8", "--calib-data", calib, "-q"])
        if not check(r.returncode == 0, f"smoothquant --fp8 of gpt2_bpe: {r.stderr.strip()}"):
            return
        model = os.path.join(out, "1-gpu")
        prompts = os.path.join(tmp, "p.txt")
        with open(prompts, "w") as f:
            f.write("the cat sat on the\nonce upon a time\n")
        for label, flags in MODES.items():
            res = os.path.join(tmp, f"text-{label}.jsonl")
            r = ftx(["generate", "-m", model, "--prompts", prompts, "--max-new-tokens", "6", "--output", res, "--quiet",
                     *flags])
            check(r.returncode == 0 and all("text" in json.loads(l) for l in open(res)),
                  f"generate {label} with text: {r.stderr.strip()}")
        lam = os.path.join(tmp, "lambada.jsonl")
        with open(lam, "w") as f:
            for t in ("the cat sat on the mat", "a dog ran in the park", "one two three four five"):
                f.write(json.dumps({"text": t}) + "\n")
        res = os.path.join(tmp, "lam.jsonl")
        r = ftx(["eval-lambada", "-m", model, "--data", lam, "--output", res, "--quiet", "--fp8", "--fp8-kv-cache"])
        if check(r.returncode == 0, f"eval-lambada --fp8 --fp8-kv-cache: {r.stderr.strip()}"):
            check(len(open(res).read().splitlines()) == 3, "eval-lambada --fp8: 3 results")
        r = ftx(["chat", "-m", model, "--fp8", "--fp8-kv-cache", "--max-new-tokens", "4"],
                stdin="hello there\nand then\n/quit\n")
        check(r.returncode == 0 and r.stdout.strip() != "", f"chat --fp8: exit {r.returncode}, {r.stderr.strip()}")
        print("beam search; smoothquant --fp8 then generate (text), eval-lambada and chat with --fp8 --fp8-kv-cache")


def test_sessions():
    with tempfile.TemporaryDirectory() as tmp:
        for m in ["gpt2", "gptneox", "bloom"]:
            sessions_test.check_rounds(os.path.join(FP8, m, "1-gpu"), tmp, extra=["--fp8", "--fp8-kv-cache"],
                                       label=f"{m} fp8")
        if shutil.which("mpirun"):
            sessions_test.check_rounds(os.path.join(FP8, "gpt2", "2-gpu"), tmp, mpi=2, extra=["--fp8", "--fp8-kv-cache"],
                                       label="gpt2 TP 2 fp8")
    print("sessions with --fp8 --fp8-kv-cache equal fresh requests over the whole context")


def one_line_error(r, code, text, label):
    lines = r.stderr.strip().splitlines()
    return check(r.returncode == code and len(lines) == 1 and lines[0].startswith("ftx") and text in lines[0],
                 f"{label}: expected exit {code} and one line naming '{text}', got {r.returncode} {r.stderr.strip()!r}")


def test_errors():
    src = os.path.join(FP8, "gpt2", "1-gpu")
    ids = os.path.join(FIX, "gpt2", "start_ids.csv")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "never.jsonl")

        def run(folder, flags):
            return ftx(["generate", "-m", folder, "--input-ids", ids, "--max-new-tokens", "2", "--output", out, *flags])

        plain = os.path.join(FIX, "gpt2", "1-gpu")

        def bad_copy():
            """A copy of the FP8 folder to break, without manifest.json (a folder edited by hand: the
            checks below are the FP8 loader's, not the manifest's)."""
            bad = os.path.join(tmp, "bad")
            shutil.rmtree(bad, ignore_errors=True)
            shutil.copytree(src, bad)
            os.remove(os.path.join(bad, "manifest.json"))
            return bad

        for flags, missing in ((["--fp8"], "model.layers.0.attention.query_key_value.weight.fp8.0.bin"),
                               (["--fp8-kv-cache"], "model.layers.0.attention.kv_cache_scaling_factor.bin")):
            one_line_error(run(plain, flags), 1, missing, f"{flags} on a folder without FP8 files")
            check("smoothquant --fp8" in run(plain, flags).stderr, f"{flags}: the error says how to make the files")
        cases = [("model.layers.1.attention.dense.activation_scaling_factor.bin", np.float32(0.0), ["--fp8"]),
                 ("model.layers.0.mlp.dense_h_to_4h.weights_scaling_factor.bin", np.float32("nan"), ["--fp8"]),
                 ("model.layers.1.attention.kv_cache_scaling_factor.bin", np.float32(-1.0), ["--fp8-kv-cache"]),
                 ("model.layers.1.attention.kv_cache_scaling_factor.bin", np.float32(0.0), ["--fp8-kv-cache"])]
        for name, value, flags in cases:
            bad = bad_copy()
            np.array([value], dtype=np.float32).tofile(os.path.join(bad, name))
            one_line_error(run(bad, flags), 1, name, f"{name} = {value}")
            check("not a finite positive number" in run(bad, flags).stderr, f"{name} = {value}: says why")
        bad = bad_copy()
        os.remove(os.path.join(bad, "model.layers.0.mlp.dense_4h_to_h.activation_scaling_factor.bin"))
        one_line_error(run(bad, ["--fp8"]), 1, "dense_4h_to_h.activation_scaling_factor.bin", "a missing scale")
        check("smoothquant --fp8" in run(bad, ["--fp8"]).stderr, "a missing scale: the error says how to make it")
        bad = bad_copy()
        w = os.path.join(bad, "model.layers.1.mlp.dense_h_to_4h.weight.fp8.0.bin")
        q = np.fromfile(w, np.uint8)
        q[5] = 0xFF
        q.tofile(w)
        one_line_error(run(bad, ["--fp8-kv-cache", "--fp8"]), 1, "NaN code", "a NaN code in an FP8 weight file")
        check(not os.path.exists(out), "a failed run wrote output")
        one_line_error(run(src, ["--fp8", "--int8-mode", "1"]), 2, "--fp8", "--fp8 with --int8-mode 1")
        one_line_error(run(src, ["--fp8-kv-cache", "--int8-kv-cache"]), 2, "--int8-kv-cache", "both KV caches")
        lam = os.path.join(tmp, "lam.jsonl")
        with open(lam, "w") as f:
            f.write(json.dumps({"text": "the cat sat on the mat"}) + "\n")
        r = ftx(["eval-lambada", "-m", os.path.join(FIX, "gpt2_bpe", "1-gpu"), "--data", lam, "--output", out,
                 "--quiet", "--fp8"])
        one_line_error(r, 1, "weight.fp8.0.bin", "eval-lambada --fp8 on a folder without FP8 files")
        r = ftx(["chat", "-m", os.path.join(FIX, "gpt2_bpe", "1-gpu"), "--fp8-kv-cache"], stdin="hello\n")
        one_line_error(r, 1, "kv_cache_scaling_factor.bin", "chat --fp8-kv-cache on a folder without scales")
        # A ranges file saved before K/V ranges existed.
        calib, _ = calib_file(tmp, n=3)
        rpath = os.path.join(tmp, "r.json")
        sq_ok(["-i", plain, "-o", os.path.join(tmp, "sq"), "--alpha", "0.5", "--calib-data", calib,
               "--save-act-ranges", rpath, "-q"])
        j = json.load(open(rpath))
        del j["kv"]
        json.dump(j, open(rpath, "w"))
        r = sq(["-i", plain, "-o", os.path.join(tmp, "sq8"), "--fp8", "--act-ranges", rpath])
        one_line_error(r, 1, "no K/V ranges", "--fp8 with an old ranges file")
        check(not os.path.exists(os.path.join(tmp, "sq8", "1-gpu")), "--fp8 with an old ranges file: no output")
        r = sq(["-i", plain, "-o", os.path.join(tmp, "sq9"), "--calib-data", calib])
        one_line_error(r, 2, "--fp8", "smoothquant with nothing to do names --fp8")
        # A config.ini whose kv_head_num does not describe the files (grouped-query QKV is narrower):
        # the QKV file named with its size, before anything is calibrated.
        gqa = os.path.join(tmp, "gqa")
        shutil.copytree(plain, gqa)
        ini = os.path.join(gqa, "config.ini")
        text = open(ini).read()
        check("kv_head_num = 4" in text, "the gpt2 fixture has 4 key/value heads")
        open(ini, "w").write(text.replace("kv_head_num = 4", "kv_head_num = 2"))
        for mode in (["--fp8"], ["--alpha", "0.5"]):
            r = sq(["-i", gqa, "-o", os.path.join(tmp, "sq10"), *mode, "--calib-data", calib])
            one_line_error(r, 1, "query_key_value.weight.0.bin", f"smoothquant {mode[0]} of a folder its config.ini misdescribes")
        check(not os.path.exists(os.path.join(tmp, "sq10", "1-gpu")), "a misdescribed folder: no output")
        print("bad FP8 inputs: one-line errors naming the file or flag, no output")


if __name__ == "__main__":
    {"export": test_export, "cli": test_cli, "sessions": test_sessions,
     "errors": test_errors}[sys.argv[1]]()
    finish(f"fp8_test {sys.argv[1]}")
