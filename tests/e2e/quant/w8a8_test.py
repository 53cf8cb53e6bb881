#!/usr/bin/python3
"""End-to-end checks of SmoothQuant W8A8 (`--int8-mode 2`) in `ftx generate`, `ftx eval-lambada`
and `ftx chat`, on the `ftx smoothquant` folders of scripts/fixtures/make_w8a8_fixtures.py (the
logits are checked by the engine_w8a8_test gtests):

  * generate's greedy output_ids equal the float64 emulation's greedy paths (expected.json) for
    per-tensor and --per-token --per-channel, on GPT-2, GPT-J, GPT-NeoX, BLOOM, OPT, SantaCoder
    (multi-query) and the Llama and Qwen2 checkpoints of tests/fixtures/hf5 (grouped-query
    attention, SwiGLU, RMSNorm; and Llama with outlier channels in K and V, the model unchanged),
    and for FasterTransformer's files (--format ft) on GPT-2, BLOOM and OPT, at TP 1 and at TP 2
    under mpirun; --per-token alone, --per-channel alone and with --int8-kv-cache run;
  * the INT8 KV cache on Qwen2 and the outlier Llama, where it changes greedy tokens:
    --int8-kv-cache with the folder's floating-point weights and with --int8-mode 2 gives the
    emulation's tokens (tests/reference/int8_kv_reference.py), TP 1 and 2, which differ from the
    emulation's without the cache and from ftx's own run without --int8-kv-cache (so that a run
    that ignored the flag fails);
  * eval-lambada --int8-mode 2 and chat --int8-mode 2 run;
  * bad input, each a one-line error with a non-zero exit and no output: a folder without the int8
    files (the missing file named), a folder smoothquant wrote with --calibrate-kv-cache only,
    --per-token on FT-format files (per-tensor only), FT-format QKV input scales that differ or are
    0, an unknown int8_format, a grouped-query folder that says int8_format = ft, --per-token
    without --int8-mode 2.
Environment: FTX_BIN, FTX_FIXTURES.
"""
import json
import os
import sys
import shutil
import struct
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish, run_ftx as ftx  # noqa: E402

ENGINE = os.path.join(os.environ["FTX_FIXTURES"], "engine")
W8 = os.path.join(os.environ["FTX_FIXTURES"], "w8a8")
MODELS = ["gpt2", "gptj", "gptneox", "bloom", "opt_post", "santacoder", "llama", "qwen2", "llama_kv_outliers"]
MODES = {"per_tensor": [], "per_token_channel": ["--per-token", "--per-channel"]}
# mode -> (generate's flags, expected.json's section of the same run without the INT8 KV cache)
KV_MODES = {"int8_kv": (["--int8-kv-cache"], "float"),
            "w8a8_int8_kv": (["--int8-mode", "2", "--int8-kv-cache"], "per_tensor")}
FT_MODELS = ["gpt2", "bloom", "opt_post"]  # with FasterTransformer's files (OUT/NAME/ft, section "ft")


def generate(tmp, folder, ids, extra, mpi=0, mode=("--int8-mode", "2")):
    out = os.path.join(tmp, "out.jsonl")
    r = ftx(["generate", "-m", folder, "--input-ids", ids, "--max-new-tokens", "6", "--output", out, "--force",
             "--quiet", *mode, *extra], mpi=mpi)
    if r.returncode != 0:
        check(False, f"{folder} {extra}: exit {r.returncode}: {r.stderr.strip()}")
        return None
    with open(out) as f:
        return [json.loads(l)["output_ids"] for l in f]


def expect_error(tmp, args, words, label):
    out = os.path.join(tmp, "never.jsonl")
    r = ftx(args + ["--output", out])
    lines = r.stderr.strip().splitlines()
    check(r.returncode != 0 and len(lines) == 1 and all(w in r.stderr for w in words) and not os.path.exists(out),
          f"{label}: exit {r.returncode}, {r.stderr.strip()!r} (want one line with {words})")


def check_kv_cache(tmp, m, exp, ids, mode, flags, without, mpi):
    """generate with the INT8 KV cache gives the emulation's greedy tokens, which are not those of the
    same run without it (the emulation's, and ftx's own): a run that ignored the flag fails."""
    want, base = exp[mode]["tp1"]["greedy"], exp[without]["tp1"]["greedy"]
    check(want != base, f"{m} {mode}: the emulation's tokens equal {without}'s ({base}): the INT8 KV cache changes "
                        "nothing on this fixture, so the check could not fail")
    plain = [f for f in flags if f != "--int8-kv-cache"]
    # Per-tensor scales (the KV cache's, per-tensor W8A8's): each rank's slice is quantised to the
    # values of the whole, so the TP-1 emulation is TP 2's too.
    for tp in (1, 2) if mpi else (1,):
        folder = os.path.join(W8, m, f"{tp}-gpu")
        got = generate(tmp, folder, ids, flags, mpi=tp if tp > 1 else 0, mode=())
        off = generate(tmp, folder, ids, plain, mpi=tp if tp > 1 else 0, mode=())
        check(got == want, f"{m} {flags} tp{tp}: {got} != emulation {want}")
        check(off == base, f"{m} {plain} tp{tp} (no --int8-kv-cache): {off} != emulation {base}")
        check(got != off, f"{m} {flags} tp{tp}: the same tokens as without --int8-kv-cache ({off})")


def main():
    tmp = tempfile.mkdtemp()
    try:
        mpi = shutil.which("mpirun") is not None
        for m in MODELS:
            exp = json.load(open(os.path.join(W8, m, "expected.json")))
            ids = os.path.join(tmp, f"{m}_ids.csv")
            with open(ids, "w") as f:
                f.writelines(",".join(map(str, p)) + "\n" for p in exp["prompts"])
            for mode, flags in MODES.items():
                for tp in ((1, 2) if mpi else (1,)):
                    got = generate(tmp, os.path.join(W8, m, f"{tp}-gpu"), ids, flags, mpi=tp if tp > 1 else 0)
                    want = exp[mode][f"tp{tp}"]["greedy"]
                    check(got == want, f"{m} {mode} tp{tp}: {got} != emulation {want}")
            if m in FT_MODELS:
                for tp in ((1, 2) if mpi else (1,)):
                    got = generate(tmp, os.path.join(W8, m, "ft", f"{tp}-gpu"), ids, [], mpi=tp if tp > 1 else 0)
                    want = exp["ft"][f"tp{tp}"]["greedy"]
                    check(got == want, f"{m} FT-format files tp{tp}: {got} != emulation {want}")
            for mode, (flags, without) in KV_MODES.items():
                if mode in exp:
                    check_kv_cache(tmp, m, exp, ids, mode, flags, without, mpi)
            print(f"{m}: W8A8 greedy tokens equal the emulation, per-tensor and per-token+per-channel"
                  f"{', FT-format files' if m in FT_MODELS else ''}{', INT8 KV cache' if 'int8_kv' in exp else ''}"
                  f", TP 1{' and 2' if mpi else ''}")
        g = os.path.join(W8, "gpt2", "1-gpu")
        ids = os.path.join(ENGINE, "gpt2", "start_ids.csv")
        for flags in (["--per-token"], ["--per-channel"], ["--int8-kv-cache"]):
            check(generate(tmp, g, ids, flags) is not None, f"{flags} alone runs")

        gb = os.path.join(ENGINE, "gpt2_bpe", "1-gpu")
        sqb = os.path.join(tmp, "sq_bpe")
        calib = os.path.join(tmp, "calib.jsonl")
        with open(calib, "w") as f:
            for t in ("the cat sat on the mat", "a dog ran in the park", "one two three four five"):
                f.write(json.dumps({"text": t}) + "\n")
        r = ftx(["smoothquant", "-i", gb, "-o", sqb, "--alpha", "0.5", "--calib-data", calib, "-q"])
        check(r.returncode == 0, f"smoothquant gpt2_bpe: {r.stderr.strip()}")
        res = os.path.join(tmp, "lambada.jsonl")
        r = ftx(["eval-lambada", "-m", os.path.join(sqb, "1-gpu"), "--data", calib, "--output", res, "--quiet",
                 "--int8-mode", "2", "--per-token"])
        check(r.returncode == 0 and len(open(res).readlines()) == 3 if r.returncode == 0 else False,
              f"eval-lambada --int8-mode 2: {r.stderr.strip()}")
        r = ftx(["chat", "-m", os.path.join(sqb, "1-gpu"), "--int8-mode", "2", "--max-new-tokens", "3"],
                stdin="hello there\n")
        check(r.returncode == 0, f"chat --int8-mode 2: exit {r.returncode}: {r.stderr.strip()}")

        # Bad input.
        base = ["generate", "-m"]
        expect_error(tmp, base + [os.path.join(ENGINE, "gpt2", "1-gpu"), "--input-ids", ids, "--max-new-tokens", "2",
                                  "--int8-mode", "2"], ["smoothquant"], "a plain folder")
        broken = os.path.join(tmp, "broken")
        shutil.copytree(g, broken)
        missing = "model.layers.1.mlp.dense_4h_to_h.weight.int8.col.0.bin"
        os.remove(os.path.join(broken, missing))
        os.remove(os.path.join(broken, "manifest.json"))
        expect_error(tmp, base + [broken, "--input-ids", ids, "--max-new-tokens", "2", "--int8-mode", "2",
                                  "--per-channel"], [missing, "missing"], "a missing int8 file")
        kv = os.path.join(tmp, "kv")
        ftx(["smoothquant", "-i", os.path.join(ENGINE, "gpt2", "1-gpu"), "-o", kv, "--calibrate-kv-cache",
             "--calib-data", os.path.join(W8, "calib.jsonl"), "-q"])
        expect_error(tmp, base + [os.path.join(kv, "1-gpu"), "--input-ids", ids, "--max-new-tokens", "2",
                                  "--int8-mode", "2"], ["smoothquant = None"], "a KV-cache-only folder")
        expect_error(tmp, base + [os.path.join(W8, "gpt2", "ft", "1-gpu"), "--input-ids", ids, "--max-new-tokens", "2",
                                  "--int8-mode", "2", "--per-token"], ["int8_format = ft", "per-tensor"],
                     "--per-token on FT-format files")
        ftb = os.path.join(tmp, "ft_broken")
        shutil.copytree(os.path.join(W8, "gpt2", "ft", "1-gpu"), ftb)
        os.remove(os.path.join(ftb, "manifest.json"))
        bad = "model.layers.0.attention.query_key_value.scale.bin"
        with open(os.path.join(ftb, bad), "wb") as f:
            f.write(struct.pack("<3f", 10.0, 10.0, 12.0))
        expect_error(tmp, base + [ftb, "--input-ids", ids, "--max-new-tokens", "2", "--int8-mode", "2"],
                     [bad, "differ"], "FT-format QKV input scales that differ")
        with open(os.path.join(ftb, bad), "wb") as f:
            f.write(struct.pack("<3f", 0.0, 0.0, 0.0))
        expect_error(tmp, base + [ftb, "--input-ids", ids, "--max-new-tokens", "2", "--int8-mode", "2"],
                     [bad, "not positive"], "an FT-format input scale of 0")
        ini = os.path.join(ftb, "config.ini")
        with open(ini) as f:
            text = f.read()
        with open(ini, "w") as f:
            f.write(text.replace("int8_format = ft", "int8_format = onnx"))
        expect_error(tmp, base + [ftb, "--input-ids", ids, "--max-new-tokens", "2", "--int8-mode", "2"],
                     ["config.ini", "int8_format = onnx"], "an unknown int8_format")
        gqa = os.path.join(tmp, "gqa_ft")
        shutil.copytree(os.path.join(W8, "llama", "1-gpu"), gqa)
        os.remove(os.path.join(gqa, "manifest.json"))
        ini = os.path.join(gqa, "config.ini")
        with open(ini) as f:
            text = f.read()
        with open(ini, "w") as f:
            f.write(text.replace("int8_format = trt-llm", "int8_format = ft"))
        expect_error(tmp, base + [gqa, "--input-ids", os.path.join(tmp, "llama_ids.csv"), "--max-new-tokens", "2",
                                  "--int8-mode", "2"], ["int8_format = ft", "kv_head_num 2"],
                     "FT-format files claimed for grouped-query attention")
        expect_error(tmp, base + [g, "--input-ids", ids, "--max-new-tokens", "2", "--per-token"],
                     ["--per-token", "--int8-mode 2"], "--per-token without --int8-mode 2")
        expect_error(tmp, base + [g, "--input-ids", ids, "--max-new-tokens", "2", "--int8-mode", "2", "--int8-lm-head"],
                     ["--int8-lm-head", "--int8-mode 1"], "--int8-lm-head with --int8-mode 2")
        print("w8a8 CLI: eval-lambada and chat run; bad input gives one-line errors")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish("w8a8 e2e")


if __name__ == "__main__":
    main()
