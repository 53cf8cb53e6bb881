#!/usr/bin/python3
"""End-to-end checks of weight-only INT8 (`--int8-mode 1`, FT's int8_mode 1) in `ftx generate` and
`ftx eval-lambada`, on the engine fixtures (scripts/fixtures/make_engine_models.py).

  * greedy output_ids of generate --int8-mode 1 equal the float64 emulation's greedy paths
    (expected.json "int8_weight_only", tests/reference/int8_reference.py) at TP 1, and at TP 2
    under mpirun (each rank quantises its own shard); with --dtype bf16 too (tables in bf16,
    "half_weights/int8_bf16", tests/reference/half_reference.py);
  * an unknown mode is a usage error (exit 2, one line; --int8-mode 2 is w8a8_test.py's);
  * eval-lambada --int8-mode 1 runs (GPT-2 tokenizer fixture) and scores every example.
Environment: FTX_BIN, FTX_FIXTURES.
"""
import json
import os
import sys
import shutil
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish, run_ftx as ftx  # noqa: E402

FIX = os.path.join(os.environ["FTX_FIXTURES"], "engine")
MODELS = ["gpt2", "gptj", "gptneox", "bloom"]


def generate(tmp, model, tp, extra=()):
    out = os.path.join(tmp, f"{model}-{tp}.jsonl")
    r = ftx(["generate", "-m", os.path.join(FIX, model, f"{tp}-gpu"), "--input-ids",
             os.path.join(FIX, model, "start_ids.csv"), "--max-new-tokens", "6", "--output", out, "--force",
             "--quiet", *extra], mpi=tp if tp > 1 else 0)
    if r.returncode != 0:
        check(False, f"{model} tp{tp} {extra}: exit {r.returncode}: {r.stderr.strip()}")
        return None
    with open(out) as f:
        return [json.loads(l) for l in f]


def main():
    tmp = tempfile.mkdtemp()
    try:
        mpi = shutil.which("mpirun") is not None
        for m in MODELS:
            exp = json.load(open(os.path.join(FIX, m, "expected.json")))
            for tp in ((1, 2) if mpi else (1,)):
                want = exp["int8_weight_only"][f"tp{tp}"]["greedy"]
                res = generate(tmp, m, tp, ["--int8-mode", "1"])
                for i, r in enumerate(res or []):
                    check(r["output_ids"] == want[i], f"{m} tp{tp} prompt {i}: {r['output_ids']} != emulation {want[i]}")
                # With --dtype bf16 the embedding table and lm_head are bf16 too (FT keeps them in half).
                want = exp["half_weights"]["int8_bf16"][f"tp{tp}"]["greedy"]
                res = generate(tmp, m, tp, ["--int8-mode", "1", "--dtype", "bf16"])
                for i, r in enumerate(res or []):
                    check(r["output_ids"] == want[i], f"{m} tp{tp} bf16 prompt {i}: {r['output_ids']} != emulation {want[i]}")
            print(f"{m}: int8 weight-only greedy tokens equal the emulation at TP 1{' and 2' if mpi else ''}")

        g = os.path.join(FIX, "gpt2", "1-gpu")
        ids = os.path.join(FIX, "gpt2", "start_ids.csv")
        for mode, word in (("7", "expected 0"),):
            r = ftx(["generate", "-m", g, "--input-ids", ids, "--max-new-tokens", "2", "--int8-mode", mode,
                     "--output", os.path.join(tmp, "never.jsonl")])
            check(not os.path.exists(os.path.join(tmp, "never.jsonl")), f"--int8-mode {mode}: no output")
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 2 and len(lines) == 1 and word in r.stderr,
                  f"--int8-mode {mode}: exit {r.returncode}, {r.stderr.strip()!r}")

        part = os.path.join(tmp, "p.jsonl")
        lam = os.path.join(tmp, "lambada.jsonl")
        with open(lam, "w") as f:
            for t in ("the cat sat on the mat", "a dog ran in the park", "one two three four five"):
                f.write(json.dumps({"text": t}) + "\n")
        gb = os.path.join(FIX, "gpt2_bpe", "1-gpu")
        r1 = ftx(["eval-lambada", "-m", gb, "--data", lam, "--output", part, "--quiet", "--int8-mode", "1"])
        check(r1.returncode == 0, f"eval-lambada --int8-mode 1: {r1.stderr.strip()}")
        r0 = ftx(["eval-lambada", "-m", gb, "--data", lam, "--output", os.path.join(tmp, "p0.jsonl"), "--quiet"])
        check(r0.returncode == 0, f"eval-lambada fp32: {r0.stderr.strip()}")
        if r1.returncode == 0 and r0.returncode == 0:
            a = [json.loads(l) for l in open(part)]
            b = [json.loads(l) for l in open(os.path.join(tmp, "p0.jsonl"))]
            check(len(a) == len(b) == 3, "eval-lambada: 3 results each")
            check([x["index"] for x in a] == [x["index"] for x in b], "eval-lambada: the same examples")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish("int8 e2e")


if __name__ == "__main__":
    main()
