#!/usr/bin/python3
"""End-to-end checks of the INT8 KV cache (`--int8-kv-cache`, TensorRT-LLM's --int8_kv_cache) on the
engine fixtures (scripts/fixtures/make_engine_models.py writes each layer's scale file).

Usage: int8_kv_test.py {emulation|sessions|errors|pipeline}
  emulation: the emulation's conversion on hand-computed values; greedy output_ids of generate
             --int8-kv-cache equal the float64 emulation's (expected.json "int8_kv_cache",
             tests/reference/int8_kv_reference.py) for GPT-2, GPT-J, NeoX and BLOOM, with fp32 weights
             and with --int8-mode 1, at TP 1, at TP 2 under mpirun, and (fp32 weights) at PP 2, where
             each stage holds its own layers' caches and scales.
  sessions:  session rounds (greedy, seeded top-p, beam 3; batch size 2, so rows are freed, refilled
             and beams gathered) give the tokens of one fresh request over the whole context, with the
             int8 cache (sessions_test.py's check), TP 1, and TP 2 for GPT-2.
  errors:    a folder without the scale files: generate and eval-lambada stop with one line naming the
             missing file (exit 1), no output written; the same folder runs without the flag.
  pipeline:  `ftx smoothquant --calibrate-kv-cache` writes the scales; generate, eval-lambada and chat
             then run with --int8-kv-cache (text in, text out) and the cache changes the log probs
             (beam search: greedy's log probs are those of the top-1 distribution, all 0).
Environment: FTX_BIN, FTX_FIXTURES.
"""
import json
import os
import shutil
import sys
import tempfile

import torch

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, E2E)  # e2e_util
sys.path.insert(0, os.path.join(E2E, "sessions"))  # sessions_test
sys.path.insert(0, os.path.join(E2E, "..", "reference"))
import int8_kv_reference  # noqa: E402
import sessions_test  # noqa: E402
from e2e_util import check, finish, run_ftx as ftx  # noqa: E402

FIX = os.path.join(os.environ["FTX_FIXTURES"], "engine")
MODELS = ["gpt2", "gptj", "gptneox", "bloom"]


def generate(tmp, model_dir, ids, extra=(), mpi=0, n=6):
    out = os.path.join(tmp, "out.jsonl")
    r = ftx(["generate", "-m", model_dir, "--input-ids", ids, "--max-new-tokens", str(n), "--output", out, "--force",
             "--quiet", *extra], mpi=mpi)
    if r.returncode != 0:
        return None, r.stderr
    with open(out) as f:
        return [json.loads(l) for l in f], r.stderr


def test_emulation(tmp):
    # The emulation's own conversion: scale 0.5 (1/scale = 2): x = 0.25 is 0.5 steps -> 0 (ties to
    # even), 0.75 -> 2 (1.5 steps), 1.25 -> 2 (2.5), -0.75 -> -2, 63.9 -> 127 (127.8 saturates),
    # -64.1 -> -128 (-128.2: -128 is in range, not -127), -64.3 -> -128 (-128.6 saturates); read
    # back times 0.5.
    q = int8_kv_reference.KvQuantizer([0.5])
    got = q(0, torch.tensor([0.25, 0.75, 1.25, -0.75, 63.9, -64.1, -64.3], dtype=torch.float64)).tolist()
    check(got == [0.0, 1.0, 1.0, -1.0, 63.5, -64.0, -64.0], f"emulation conversion: {got}")
    check(q.saturated == 2, f"emulation: {q.saturated} saturated, expected 2")
    mpi = shutil.which("mpirun") is not None
    for m in MODELS:
        exp = json.load(open(os.path.join(FIX, m, "expected.json")))["int8_kv_cache"]
        ids = os.path.join(FIX, m, "start_ids.csv")
        for tp in ((1, 2) if mpi else (1,)):
            for weights, extra in (("fp", []), (f"weight_only_tp{tp}", ["--int8-mode", "1"])):
                res, err = generate(tmp, os.path.join(FIX, m, f"{tp}-gpu"), ids, ["--int8-kv-cache", *extra],
                                    mpi=tp if tp > 1 else 0)
                if not check(res is not None, f"{m} tp{tp} {weights}: {err.strip()}"):
                    continue
                want = exp[weights]["greedy"]
                for i, r in enumerate(res):
                    check(r["output_ids"] == want[i],
                          f"{m} tp{tp} {weights} prompt {i}: {r['output_ids']} != emulation {want[i]}")
        if mpi:
            res, err = generate(tmp, os.path.join(FIX, m, "1-gpu"), ids,
                                ["--int8-kv-cache", "--tensor-para-size", "1", "--pipeline-para-size", "2"], mpi=2)
            if check(res is not None, f"{m} pp2: {err.strip()}"):
                for i, r in enumerate(res):
                    check(r["output_ids"] == exp["fp"]["greedy"][i],
                          f"{m} pp2 prompt {i}: {r['output_ids']} != emulation {exp['fp']['greedy'][i]}")
        print(f"{m}: int8 KV-cache greedy tokens equal the emulation (fp32 and int8_mode 1 weights) at TP 1"
              f"{', TP 2 and PP 2' if mpi else ''}")


def test_sessions(tmp):
    for m in ["gpt2", "gptneox", "bloom"]:
        sessions_test.check_rounds(os.path.join(FIX, m, "1-gpu"), tmp, extra=["--int8-kv-cache"], label=f"{m} int8 KV")
    if shutil.which("mpirun"):
        sessions_test.check_rounds(os.path.join(FIX, "gpt2", "2-gpu"), tmp, mpi=2, extra=["--int8-kv-cache"],
                                   label="gpt2 TP 2 int8 KV")
    print("sessions with the int8 KV cache equal fresh requests over the whole context")


def test_errors(tmp):
    src = os.path.join(FIX, "gpt2", "1-gpu")
    bare = os.path.join(tmp, "bare")
    shutil.copytree(src, bare)
    missing = "model.layers.0.attention.query_key_value.scale_y_quant_orig.bin"
    os.remove(os.path.join(bare, missing))
    out = os.path.join(tmp, "never.jsonl")
    r = ftx(["generate", "-m", bare, "--input-ids", os.path.join(FIX, "gpt2", "start_ids.csv"), "--max-new-tokens",
             "2", "--int8-kv-cache", "--output", out])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and missing in r.stderr and "--calibrate-kv-cache" in r.stderr,
          f"generate without scales: exit {r.returncode}, {r.stderr.strip()!r}")
    check(not os.path.exists(out), "generate without scales: no output")
    lam = os.path.join(tmp, "lambada.jsonl")
    with open(lam, "w") as f:
        f.write(json.dumps({"text": "the cat sat on the mat"}) + "\n")
    bpe = os.path.join(tmp, "bpe")
    shutil.copytree(os.path.join(FIX, "gpt2_bpe", "1-gpu"), bpe)
    r = ftx(["eval-lambada", "-m", bpe, "--data", lam, "--output", out, "--quiet", "--int8-kv-cache"])
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and missing in r.stderr,
          f"eval-lambada without scales: exit {r.returncode}, {r.stderr.strip()!r}")
    check(not os.path.exists(out), "eval-lambada without scales: no output")
    res, err = generate(tmp, bare, os.path.join(FIX, "gpt2", "start_ids.csv"), n=2)
    check(res is not None, f"without --int8-kv-cache the folder needs no scales: {err}")
    print("a folder without KV-cache scales: one-line errors naming the file")


def test_pipeline(tmp):
    bpe = os.path.join(FIX, "gpt2_bpe", "1-gpu")
    calib = os.path.join(tmp, "calib.jsonl")
    with open(calib, "w") as f:
        for t in ("the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
                  "all that glitters is not gold"):
            f.write(json.dumps({"text": t}) + "\n")
    kv = os.path.join(tmp, "kv")
    r = ftx(["smoothquant", "-i", bpe, "-o", kv, "-g", "1", "-t", "fp32", "--calibrate-kv-cache", "--calib-data",
             calib, "-q"])
    if not check(r.returncode == 0, f"smoothquant --calibrate-kv-cache: {r.stderr.strip()}"):
        return
    model = os.path.join(kv, "1-gpu")
    check(os.path.exists(os.path.join(model, "model.layers.0.attention.query_key_value.scale_y_quant_orig.bin")),
          "smoothquant wrote the layer's KV-cache scale")
    prompts = os.path.join(tmp, "p.txt")
    with open(prompts, "w") as f:
        f.write("the cat sat on the\nonce upon a time\n")
    outs = {}
    for label, extra in (("fp", []), ("int8", ["--int8-kv-cache"])):
        out = os.path.join(tmp, f"gen-{label}.jsonl")
        r = ftx(["generate", "-m", model, "--prompts", prompts, "--max-new-tokens", "8", "--output", out, "--quiet",
                 "--return-log-probs", "--beam-width", "2", *extra])
        if check(r.returncode == 0, f"generate {label}: {r.stderr.strip()}"):
            outs[label] = [json.loads(l) for l in open(out)]
            check(all("text" in o for o in outs[label]), f"generate {label}: text output")
    if len(outs) == 2:
        check(any(a["output_log_probs"] != b["output_log_probs"] for a, b in zip(outs["fp"], outs["int8"])),
              "the int8 KV cache changes the log probs")
    lam = os.path.join(tmp, "lambada.jsonl")
    with open(lam, "w") as f:
        for t in ("the cat sat on the mat", "a dog ran in the park", "one two three four five"):
            f.write(json.dumps({"text": t}) + "\n")
    res = os.path.join(tmp, "lam.jsonl")
    r = ftx(["eval-lambada", "-m", model, "--data", lam, "--output", res, "--quiet", "--int8-kv-cache"])
    if check(r.returncode == 0, f"eval-lambada --int8-kv-cache: {r.stderr.strip()}"):
        check(len(open(res).read().splitlines()) == 3, "eval-lambada --int8-kv-cache: 3 results")
    r = ftx(["chat", "-m", model, "--int8-kv-cache", "--max-new-tokens", "4"], stdin="hello there\nand then\n/quit\n")
    check(r.returncode == 0 and r.stdout.strip() != "", f"chat --int8-kv-cache: exit {r.returncode}, {r.stderr.strip()}")
    print("smoothquant --calibrate-kv-cache, then generate, eval-lambada and chat with --int8-kv-cache")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"emulation": test_emulation, "sessions": test_sessions, "errors": test_errors,
         "pipeline": test_pipeline}[what](tmp)
    finish(f"int8_kv_test {what}")


if __name__ == "__main__":
    main()
