#!/usr/bin/python3
"""GPT-J, GPT-NeoX, BLOOM, OPT and XGLM end to end (issue 5), on the tiny HF checkpoints of
scripts/fixtures/make_arch_fixtures.py ($FTX_FIXTURES/arch, written by PyTorch with the real HF
config keys and parameter names).

Usage: arch_test.py {compat|engine|lambada|errors}
  compat   `ftx convert-hf` vs scripts/reference/ft_converters_ref.py (FT's HF converters of GPT-J,
           GPT-NeoX, BLOOM, OPT as the spec describes them; XGLM: ftx's documented layout) for
           T=1 fp32, T=2 fp32, T=2 fp16, T=1 bf16. Per tensor: identical bytes and identical file
           sets, except
             * OPT with project_in/out: model.wte.bin and model.lm_head.weight.bin are a matrix
               product (FT: torch.matmul in float32; ftx: float64 sums rounded once), compared to
               1e-6 of the tensor's largest magnitude (fp32) or one unit in the last place (fp16/bf16);
             * XGLM model.wpe.bin (sines in float64, rounded once on both sides): to 1e-6.
           Where ftx deliberately differs from FT it is asserted here too: GPT-J rotary_embedding is a
           number when rotary_dim is null (FT: "None"), GPT-J weight_data_type follows -t (FT: fp32),
           GPT-NeoX without parallel residual keeps the biases undivided at T=2 (FT divides them by T
           although its runtime adds them once after the all-reduce). Every config.ini key the
           reference writes has an equal value in ftx's (numbers numerically, booleans 1/True alike);
           manifest.json lists every file with its crc32.
  engine   each model converted for T=1 and T=2 (fp32); the gtest convert_arch_test
           (ArchEngine.LogitsMatchReference) alone and under `mpirun -np 2`: logits of every greedy
           step within 1e-4 of the row's largest logit of the float64 reference
           (tests/reference/hf_arch_reference.py); `ftx generate` greedy output_ids identical to the
           reference's, alone on 1-gpu and under mpirun on 2-gpu.
  lambada  `ftx eval-lambada` on every model that carries a tokenizer, 50 examples: GPT-2's BPE
           (gptj, opt_pre), tokenizer.json in the NeoX and BLOOM layouts (neox_tok, bloom_tok, checked
           against scripts/fixtures/hf_tokenizer_reference.py) and XGLM's SentencePiece (xglm_tok,
           against libsentencepiece's ids plus HF's fairseq offset);
           per-example predictions, word log-likelihoods and accuracies against the float64
           reference with tests/e2e/lambada/lambada_test.py's split and comparison (imported).
  errors   an unknown model_type (config or --model) lists the supported ones; --model overrides
           config.json's model_type; BLOOM apply_residual_connection_post_layernorm=true, a
           missing k_proj are one-line errors with no output folder.
"""
import configparser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch

FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "arch")
SRC = os.environ["FTX_SOURCE_DIR"]
PY = os.environ.get("FTX_TORCH_PYTHON", "/usr/bin/python3")
REF = os.path.join(SRC, "scripts", "reference", "ft_converters_ref.py")
MPIRUN = shutil.which("mpirun")
FAILS = []
REF_KIND = {"gptj": "gptj", "gpt_neox": "gptneox", "bloom": "bloom", "opt": "opt", "xglm": "xglm"}
SECTION = {"gptj": "gptj", "gpt_neox": "gptneox"}


def fail(msg):
    print("FAIL:", msg)
    FAILS.append(msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def models():
    with open(os.path.join(FIX, "models.json")) as f:
        return json.load(f)


def hf_dir(name):
    return os.path.join(FIX, name, "hf")


def convert(src, out, T, dt, *extra):
    return run([FTX, "convert-hf", "-i", src, "-o", out, "-g", str(T), "-t", dt, "--quiet", "--force", *extra])


def same_value(a, b):
    if a == b:
        return True
    norm = {"true": "1", "false": "0"}
    a2, b2 = norm.get(a.lower(), a), norm.get(b.lower(), b)
    try:
        return float(a2) == float(b2)
    except ValueError:
        return a2.lower() == b2.lower()


def ulp_close(a, b, dt):
    """a, b: raw bytes of one tensor in dtype dt; True when within the tolerance described above."""
    if dt == "fp32":
        x, y = np.frombuffer(a, np.float32), np.frombuffer(b, np.float32)
        return x.shape == y.shape and np.max(np.abs(x - y)) <= 1e-6 * max(1.0, float(np.max(np.abs(y))))
    x, y = np.frombuffer(a, np.int16).astype(np.int32), np.frombuffer(b, np.int16).astype(np.int32)
    return x.shape == y.shape and np.max(np.abs(x - y)) <= 1  # same sign: adjacent bit patterns


def check_manifest(d, tag):
    man = json.load(open(os.path.join(d, "manifest.json")))
    listed = {f["file"]: f for f in man["files"]}
    bins = {f for f in os.listdir(d) if f.endswith(".bin")}
    if set(listed) != bins:
        fail(f"{tag}: manifest lists {sorted(set(listed) ^ bins)[:4]} differently from the folder")
    for name, f in listed.items():
        data = open(os.path.join(d, name), "rb").read()
        if zlib.crc32(data) != f["crc32"] or len(data) != f["bytes"]:
            fail(f"{tag}: {name}: crc32/size does not match manifest.json")


def compat():
    for m in models():
        name, mt = m["name"], m["model_type"]
        src = hf_dir(name)
        cfg = json.load(open(os.path.join(src, "config.json")))
        approx = set()
        if mt == "opt" and cfg["word_embed_proj_dim"] != cfg["hidden_size"]:
            approx = {"model.wte.bin", "model.lm_head.weight.bin"}
        if mt == "xglm":
            approx = {"model.wpe.bin"}
        for T, dt in [(1, "fp32"), (2, "fp32"), (2, "fp16"), (1, "bf16")]:
            tag = f"{name} T={T} {dt}"
            with tempfile.TemporaryDirectory() as tmp:
                a, b = os.path.join(tmp, "ftx"), os.path.join(tmp, "ref")
                r = convert(src, a, T, dt)
                if r.returncode != 0:
                    fail(f"{tag}: ftx failed: {r.stderr.strip()}")
                    continue
                rr = run([PY, REF, REF_KIND[mt], "-i", src, "-o", b, "-g", str(T), "-t", dt])
                if rr.returncode != 0:
                    fail(f"{tag}: reference failed: {rr.stderr.strip()[-800:]}")
                    continue
                da, db = os.path.join(a, f"{T}-gpu"), os.path.join(b, f"{T}-gpu")
                ba = {f for f in os.listdir(da) if f.endswith(".bin")}
                bb = {f for f in os.listdir(db) if f.endswith(".bin")}
                if ba != bb:
                    fail(f"{tag}: file sets differ: only ftx {sorted(ba - bb)[:4]}, only reference {sorted(bb - ba)[:4]}")
                exact = 0
                for f in sorted(ba & bb):
                    x, y = open(os.path.join(da, f), "rb").read(), open(os.path.join(db, f), "rb").read()
                    if f in approx:
                        if not ulp_close(x, y, dt):
                            fail(f"{tag}: {f} differs from the reference beyond rounding")
                    elif x != y:
                        fail(f"{tag}: {f} differs from the reference")
                    else:
                        exact += 1
                sec = SECTION.get(mt, "gpt")
                ca, cb = configparser.ConfigParser(interpolation=None), configparser.ConfigParser(interpolation=None)
                ca.read(os.path.join(da, "config.ini"))
                cb.read(os.path.join(db, "config.ini"))
                for k, v in cb[sec].items():
                    if k not in ca[sec]:
                        fail(f"{tag}: config.ini [{sec}] lacks {k}")
                    elif not same_value(ca[sec][k], v):
                        fail(f"{tag}: config.ini {k} = {ca[sec][k]}, reference {v}")
                check_manifest(da, tag)
                deliberate(m, cfg, da, T, dt, ca[sec], tag)
                print(f"ok   compat {tag}: {exact} files byte-identical, {len(approx & ba)} within rounding")


def deliberate(m, cfg, d, T, dt, ini, tag):
    """The places where ftx is right and FT's converter is not (see the module docstring)."""
    mt = m["model_type"]
    if mt == "gptj":
        want = cfg["rotary_dim"] or cfg["n_embd"] // cfg["n_head"]
        if ini.get("rotary_embedding") != str(want):
            fail(f"{tag}: rotary_embedding = {ini.get('rotary_embedding')}, expected {want} (FT writes None)")
        if ini.get("weight_data_type") != dt:
            fail(f"{tag}: weight_data_type = {ini.get('weight_data_type')}, expected {dt} (follows -t)")
    if mt == "gpt_neox" and not cfg["use_parallel_residual"] and T == 2 and dt == "fp32":
        from hf_arch_reference import load_state
        sd = load_state(hf_dir(m["name"]))
        got = np.fromfile(os.path.join(d, "model.layers.0.attention.dense.bias.bin"), np.float32)
        src = sd["gpt_neox.layers.0.attention.dense.bias"].numpy()
        if not np.array_equal(got, src):
            fail(f"{tag}: attention.dense.bias is not the undivided source bias")
        if np.array_equal(got, src / 2):
            fail(f"{tag}: attention.dense.bias was divided by T as FT's converter does")
    if mt == "gpt_neox" and cfg["use_parallel_residual"] and os.path.exists(
            os.path.join(d, "model.layers.0.attention.dense.bias.bin")):
        fail(f"{tag}: parallel residual writes the separate attention bias (FT's loader reads only the sum)")


def engine():
    names = [m["name"] for m in models()]
    for name in names:
        for T in (1, 2):
            r = convert(hf_dir(name), os.path.join(FIX, name, "ft"), T, "fp32")
            if r.returncode != 0:
                fail(f"{name} T={T}: convert failed: {r.stderr.strip()}")
    dirs = ",".join(os.path.join(FIX, n) for n in names)
    exe = os.environ.get("FTX_ARCH_ENGINE_TEST")
    env = dict(os.environ, FTX_ARCH_MODELS=dirs)
    if not exe or not os.path.exists(exe):
        fail(f"FTX_ARCH_ENGINE_TEST ({exe}) is not the convert_arch_test binary")
    else:
        launches = [("tp1", [exe])]
        if MPIRUN:
            launches.append(("tp2", [MPIRUN, "-np", "2", "--oversubscribe", "--allow-run-as-root", "-x",
                                     "OMP_NUM_THREADS=1", "-x", "FTX_ARCH_MODELS", exe]))
        for tag, cmd in launches:
            r = run(cmd + ["--gtest_filter=ArchEngine.*", "--gtest_color=no"], env=env)
            if r.returncode != 0 or "[  PASSED  ] 1 test" not in r.stdout or "SKIPPED" in r.stdout:
                fail(f"engine logits {tag}: {r.stdout[-3000:]}{r.stderr[-1000:]}")
            else:
                print(f"ok   engine logits {tag}: {len(names)} models within 1e-4 of the reference")
    for name in names:
        exp = json.load(open(os.path.join(FIX, name, "expected.json")))
        for T in (1, 2):
            if T == 2 and not MPIRUN:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "out.jsonl")
                cmd = [FTX, "generate", "-m", os.path.join(FIX, name, "ft", f"{T}-gpu"), "--input-ids",
                       os.path.join(FIX, name, "start_ids.csv"), "--max-new-tokens", str(len(exp["greedy_logits"][0])),
                       "--output", out, "--quiet"]
                if T == 2:
                    cmd = [MPIRUN, "-np", "2", "--oversubscribe", "--allow-run-as-root", *cmd, "--threads", "1"]
                r = run(cmd)
                if r.returncode != 0:
                    fail(f"{name} generate T={T}: {r.stderr.strip()[-800:]}")
                    continue
                got = [json.loads(l)["output_ids"] for l in open(out)]
                if got != exp["greedy"]:
                    fail(f"{name} generate T={T}: {got} != reference {exp['greedy']}")
                else:
                    print(f"ok   generate {name} T={T}: greedy tokens equal the reference")


class XglmReferenceEncoder:
    """HF XGLMTokenizer's ids from the SentencePiece library: piece p -> p + 1, spm's unk 0 -> 3."""

    def __init__(self, model):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=model)

    def encode(self, text):
        return [p + 1 if p else 3 for p in self.sp.encode(text)]


def reference_encoder(kind, folder):
    """An independent Python tokenizer for the model's own files (None: GPT-2's BPE)."""
    sys.path.insert(0, os.path.join(SRC, "scripts", "fixtures"))
    if kind in ("neox", "bloom"):
        import hf_tokenizer_reference
        return hf_tokenizer_reference.HfBpe(os.path.join(folder, "tokenizer.json"))
    if kind == "xglm":
        return XglmReferenceEncoder(os.path.join(folder, "sentencepiece.bpe.model"))
    return None


def lambada():
    sys.path.insert(0, os.path.join(SRC, "tests", "e2e", "lambada"))
    os.environ.setdefault("FTX_LAMBADA_EXAMPLES", "50")
    import lambada_test as lt  # split_ft, reference, compare (the FT protocols' reference)
    from hf_arch_reference import build
    n = int(os.environ["FTX_LAMBADA_EXAMPLES"])
    texts = [json.loads(l)["text"] for l in open(os.path.join(SRC, "data", "lambada", "lambada_test.jsonl"))][:n]
    for m in models():
        if not m["gpt2_vocab"]:
            continue
        name = m["name"]
        enc = reference_encoder(m["gpt2_vocab"], hf_dir(name))
        r = convert(hf_dir(name), os.path.join(FIX, name, "ft"), 1, "fp32")
        if r.returncode != 0:
            fail(f"{name}: convert failed: {r.stderr}")
            continue
        cfg, W = build(hf_dir(name))
        ref = lt.reference(cfg, W, texts, enc)
        with tempfile.TemporaryDirectory() as tmp:
            out, summ = os.path.join(tmp, "out.jsonl"), os.path.join(tmp, "summary.json")
            r = run([FTX, "eval-lambada", "-m", os.path.join(FIX, name, "ft", "1-gpu"), "--max-examples", str(n),
                     "--batch-size", "8", "--output", out, "--summary-json", summ, "--quiet"])
            if r.returncode != 0:
                fail(f"{name} eval-lambada: {r.stderr.strip()}")
                continue
            got = [json.loads(l) for l in open(out)]
            before = len(lt.failures)
            lt.compare(name, got, ref)
            s = json.load(open(summ))
            ref_lt = sum(x["last_token_predicted"] == x["last_token_target"] for x in ref)
            ref_w = sum(x["word_predicted_ids"] == x["word_target_ids"] for x in ref)
            if s["last_token_correct"] != ref_lt or s["word_correct"] != ref_w:
                lt.failures.append(f"{name}: accuracies {s} vs reference {ref_lt}, {ref_w}")
            for f in lt.failures[before:]:
                fail(f)
            if len(lt.failures) == before:
                print(f"ok   lambada {name}: {n} examples equal the float64 reference")


def expect_error(tag, cmd, needle, out):
    r = run(cmd)
    lines = [l for l in r.stderr.strip().splitlines() if l]
    if r.returncode == 0:
        fail(f"{tag}: exit 0, expected an error")
    elif len(lines) != 1 or not lines[0].startswith("ftx: error:"):
        fail(f"{tag}: expected one `ftx: error:` line, got {r.stderr!r}")
    elif needle.lower() not in lines[0].lower():
        fail(f"{tag}: message {lines[0]!r} does not mention {needle!r}")
    elif os.path.exists(os.path.join(out, "1-gpu")):
        fail(f"{tag}: left an output folder")
    else:
        print(f"ok   errors {tag}: {lines[0]}")


def edited_copy(tmp, name, edit_cfg=None, drop=None):
    """A copy of fixture `name`'s HF folder with config.json edited and/or a tensor dropped."""
    d = os.path.join(tmp, name + "_" + str(len(os.listdir(tmp))))
    shutil.copytree(hf_dir(name), d)
    if edit_cfg:
        c = json.load(open(os.path.join(d, "config.json")))
        edit_cfg(c)
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    if drop:
        p = os.path.join(d, "pytorch_model.bin")
        sd = torch.load(p)
        del sd[drop]
        torch.save(sd, p)
    return d


def errors():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        conv = lambda src, *x: [FTX, "convert-hf", "-i", src, "-o", out, "--quiet", *x]  # noqa: E731
        supported = ("gpt2, gpt_bigcode (aliases: santacoder, starcoder), gptj, gpt_neox, bloom, opt, xglm, llama, "
                     "mistral, qwen2")
        src = edited_copy(tmp, "bloom", lambda c: c.update(model_type="falcon"))
        expect_error("unknown model_type", conv(src), supported, out)
        expect_error("unknown --model", conv(hf_dir("bloom"), "--model", "falcon"), "--model", out)
        # --model overrides config.json's model_type (here a name ftx does not know).
        r = run(conv(src, "--model", "bloom"))
        if r.returncode != 0 or "architecture = bloom" not in open(os.path.join(out, "1-gpu", "config.ini")).read():
            fail(f"--model bloom did not convert: {r.stderr}")
        else:
            print("ok   errors --model bloom overrides model_type falcon")
        shutil.rmtree(out)
        src = edited_copy(tmp, "bloom", lambda c: c.update(apply_residual_connection_post_layernorm=True))
        expect_error("bloom post-LN residual", conv(src), "apply_residual_connection_post_layernorm", out)
        src = edited_copy(tmp, "opt_post_proj", drop="model.decoder.layers.1.self_attn.k_proj.weight")
        expect_error("missing k_proj", conv(src), "k_proj", out)
        src = edited_copy(tmp, "gptj_rotary_null", lambda c: c.update(n_head=3))
        expect_error("gptj heads", conv(src), "multiple", out)


def main():
    sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
    {"compat": compat, "engine": engine, "lambada": lambada, "errors": errors}[sys.argv[1]]()
    if FAILS:
        print(f"{len(FAILS)} failure(s)")
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
