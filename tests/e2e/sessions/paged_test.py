#!/usr/bin/python3
"""The paged KV cache (issue 28) through `ftx generate` and `ftx chat`, end to end on the engine
fixtures: a fixed --kv-cache-memory budget far below what the batch would need row by row gives
the same output as the default (auto) cache, whatever the tokens per block.

Usage: paged_test.py {budget|tp|errors}
  budget:  GPT-2, NeoX and BLOOM: sampled and beam-search requests, streaming, session rounds (at
           batch size 2, so idle sessions also lose their blocks) and --memory-len sessions, each
           under a budget of a few requests' blocks (4 tokens per block): every result line, and
           every streamed line, equal the auto run's; the summary counts preemptions. A job killed
           part way under the budget and resumed gives the uninterrupted file.
  tp:      the same requests under `mpirun -np 2` (2-gpu folders, TP 2) with a budget: equal to TP 1;
           and at PP 2 (stages of 2 and 3 layers, whose blocks differ in size).
  errors:  --tokens-per-block not a power of two, a --kv-cache-memory that is not a size, a budget
           that holds no block, a request that could not finish even alone in the budget: one-line
           errors, exit 2 for the flags, 1 for the others.
Environment: FTX_BIN, FTX_FIXTURES.
"""
import configparser
import json
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, check_killed_and_resumed, finish, mpirun  # noqa: E402

FTX = os.environ["FTX_BIN"]
ENGINE = os.path.join(os.environ["FTX_FIXTURES"], "engine")
BLOCK = 4


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def block_bytes(folder, tp=1):
    """Bytes of one KV block of BLOCK tokens on one rank: K and V of every layer, fp32."""
    c = configparser.ConfigParser()
    c.read(os.path.join(folder, "config.ini"))
    g = c[c.sections()[0]]
    heads = 1 if g.get("multi_query_mode", "").lower() in ("1", "true") else int(g["head_num"]) // tp
    return 2 * int(g["num_layer"]) * heads * BLOCK * int(g["size_per_head"]) * 4


def generate(folder, lines, tmp, extra=(), mpi=0, output="-"):
    path = write(os.path.join(tmp, "in.jsonl"), "".join(json.dumps(l) + "\n" for l in lines))
    cmd = (mpirun(mpi) if mpi else []) + [FTX, "generate", "-m", folder, "--prompts", path, "--max-new-tokens", "8",
                                           "--output", output, "--force", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return r


def requests(seed, beams):
    rng = random.Random(seed)
    out = []
    for i in range(24):
        r = {"ids": [rng.randrange(1, 290) for _ in range(rng.randint(1, 9))], "max_new_tokens": rng.randint(2, 14),
             "seed": i, "return_log_probs": True}
        if beams:
            r["beam_width"] = 3
        elif i % 3 == 1:
            r["top_k"] = 5
        elif i % 3 == 2:
            r["top_p"] = 0.9
        out.append(r)
    return out


def budget(folder, tp=1, beams=3):
    """A budget for the longest request alone (25 slots, beam 3) and little more."""
    return str(beams * 7 * block_bytes(folder, tp) + block_bytes(folder, tp))


def same_results(a, b):
    """Result lines equal but for their log probs, which may differ by float rounding (1e-5)."""
    x, y = [json.loads(l) for l in a.splitlines()], [json.loads(l) for l in b.splitlines()]
    if len(x) != len(y):
        return False
    for p, q in zip(x, y):
        lp, lq = p.pop("output_log_probs", []), q.pop("output_log_probs", [])
        for k in ("cum_log_prob",):
            if abs(p.pop(k, 0) - q.pop(k, 0)) > 1e-4:
                return False
        for bp, bq in zip(p.pop("beams", []), q.pop("beams", [])):
            if bp["output_ids"] != bq["output_ids"] or abs(bp["cum_log_prob"] - bq["cum_log_prob"]) > 1e-4:
                return False
        if p != q or len(lp) != len(lq) or any(abs(u - v) > 1e-4 for u, v in zip(lp, lq)):
            return False
    return True


def preemptions(stderr):
    m = re.search(r"(\d+) preemptions", stderr)
    return int(m.group(1)) if m else -1


def check_budget_runs(folder, tmp, mpi=0, tp=1, label=""):
    for beams in (False, True):
        what = f"{label} {'beam 3' if beams else 'sampling'}"
        lines = requests(7 + beams, beams)
        auto = generate(os.path.join(ENGINE, os.path.basename(os.path.dirname(folder)), "1-gpu"), lines, tmp,
                        ["--batch-size", "8", "--quiet"])
        paged = generate(folder, lines, tmp, ["--batch-size", "8", "--tokens-per-block", str(BLOCK),
                                              "--kv-cache-memory", budget(folder, tp)], mpi)
        if not check(auto.returncode == 0 and paged.returncode == 0, f"{what}: {auto.stderr} {paged.stderr}"):
            continue
        check(same_results(paged.stdout, auto.stdout), f"{what}: the budget run differs from the auto run")
        check(preemptions(paged.stderr) > 0, f"{what}: no request was preempted ({paged.stderr.strip()})")


def check_sessions(folder, tmp, mpi=0, tp=1, label=""):
    rng = random.Random(4)
    lines = [{"session": s, "ids": [rng.randrange(1, 290) for _ in range(rng.randint(1, 5))],
              "max_new_tokens": rng.randint(2, 6)} for s in "abacbcab"]
    args = ["--batch-size", "2", "--quiet"]
    auto = generate(os.path.join(ENGINE, os.path.basename(os.path.dirname(folder)), "1-gpu"), lines, tmp, args)
    # Room for one session's whole context (8 rounds of up to 11 tokens) and a little more.
    small = ["--tokens-per-block", str(BLOCK), "--kv-cache-memory", str(24 * block_bytes(folder, tp))]
    paged = generate(folder, lines, tmp, args + small, mpi)
    if check(auto.returncode == 0 and paged.returncode == 0, f"{label} sessions: {auto.stderr} {paged.stderr}"):
        check(paged.stdout == auto.stdout, f"{label} sessions: the budget run differs from the auto run")
    ring = generate(folder, lines, tmp, args + small + ["--memory-len", "16"], mpi)
    ring_auto = generate(folder, lines, tmp, args + ["--memory-len", "16"], mpi)
    if check(ring.returncode == 0 and ring_auto.returncode == 0, f"{label} --memory-len: {ring.stderr}"):
        check(ring.stdout == ring_auto.stdout, f"{label} --memory-len: the budget run differs from the auto run")


def test_budget(tmp):
    for m in ["gpt2", "gptneox", "bloom"]:
        folder = os.path.join(ENGINE, m, "1-gpu")
        check_budget_runs(folder, tmp, label=m)
        check_sessions(folder, tmp, label=m)
    # Streaming: every streamed line as in the auto run (a preempted request streams nothing twice).
    folder = os.path.join(ENGINE, "gpt2", "1-gpu")
    lines = requests(11, False)
    out = os.path.join(tmp, "streamed.jsonl")
    auto = generate(folder, lines, tmp, ["--batch-size", "8", "--stream", "--quiet"], output=out)
    paged = generate(folder, lines, tmp, ["--batch-size", "8", "--stream", "--tokens-per-block", str(BLOCK),
                                          "--kv-cache-memory", budget(folder, 1, 1)], output=out)
    if check(auto.returncode == 0 and paged.returncode == 0, f"streaming: {auto.stderr} {paged.stderr}"):
        key = lambda l: (l["index"], l["step"])  # noqa: E731
        a = sorted((json.loads(l) for l in auto.stdout.splitlines()), key=key)
        b = sorted((json.loads(l) for l in paged.stdout.splitlines()), key=key)
        check(a == b, "streaming: the budget run streams other lines than the auto run")
        check(preemptions(paged.stderr) > 0, f"streaming: no request was preempted ({paged.stderr.strip()})")
    # Killed part way under the budget, resumed: the uninterrupted file.
    rng = random.Random(5)
    many = [{"ids": [rng.randrange(1, 290) for _ in range(rng.randint(1, 9))], "max_new_tokens": rng.randint(2, 14),
             "seed": i} for i in range(3000)]
    path = write(os.path.join(tmp, "many.jsonl"), "".join(json.dumps(l) + "\n" for l in many))
    base = [FTX, "generate", "-m", folder, "--prompts", path, "--max-new-tokens", "8", "--batch-size", "8",
            "--threads", "1", "--quiet", "--tokens-per-block", str(BLOCK), "--kv-cache-memory", budget(folder, 1, 1)]
    ref = os.path.join(tmp, "ref.jsonl")
    r = subprocess.run(base + ["--output", ref], capture_output=True, text=True, timeout=600)
    if not check(r.returncode == 0, f"uninterrupted: {r.stderr}"):
        return
    check_killed_and_resumed(base, os.path.join(tmp, "out.jsonl"), ref, 40000, 3000)


def test_tp(tmp):
    for m in ["gpt2", "bloom"]:
        folder = os.path.join(ENGINE, m, "2-gpu")
        check_budget_runs(folder, tmp, mpi=2, tp=2, label=f"{m} TP 2")
        check_sessions(folder, tmp, mpi=2, tp=2, label=f"{m} TP 2")
    # Pipeline parallelism: the stages hold 2 and 3 of the 5 layers, so the same budget holds more
    # blocks on one than on the other; every rank takes the smaller count.
    pp = os.path.join(os.environ["FTX_FIXTURES"], "pp", "gpt2_5", "1-gpu")
    lines = requests(9, False)
    one = generate(pp, lines, tmp, ["--batch-size", "8", "--quiet"])
    two = generate(pp, lines, tmp, ["--batch-size", "8", "--pipeline-para-size", "2", "--tokens-per-block", str(BLOCK),
                                    "--kv-cache-memory", str(7 * block_bytes(pp) * 3 // 5 + 1)], mpi=2)
    if check(one.returncode == 0 and two.returncode == 0, f"PP 2: {one.stderr} {two.stderr}"):
        check(same_results(two.stdout, one.stdout), "PP 2 under a budget differs from PP 1")
        check(preemptions(two.stderr) > 0, f"PP 2: no request was preempted ({two.stderr.strip()})")


def test_errors(tmp):
    folder = os.path.join(ENGINE, "gpt2", "1-gpu")
    lines = [{"ids": [1, 2, 3], "max_new_tokens": 4}]

    def expect(what, extra, code, text, rows=lines):
        r = generate(folder, rows, tmp, extra)
        err = r.stderr.strip()
        check(r.returncode == code and text in err and err.startswith("ftx: error:") and len(err.splitlines()) == 1,
              f"{what}: exit {r.returncode}, {err!r} (want {code}, {text!r})")

    expect("--tokens-per-block 48", ["--tokens-per-block", "48"], 2,
           "--tokens-per-block 48 is not a power of two in [1, 65536]")
    expect("--tokens-per-block 0", ["--tokens-per-block", "0"], 2, "--tokens-per-block 0 is not a power of two")
    expect("--kv-cache-memory lots", ["--kv-cache-memory", "lots"], 2, "--kv-cache-memory lots: not a positive number")
    expect("--kv-cache-memory 2X", ["--kv-cache-memory", "2X"], 2, "--kv-cache-memory 2X: unknown unit \"X\"")
    expect("--kv-cache-memory 100", ["--kv-cache-memory", "100"], 1,
           "--kv-cache-memory 100 bytes holds no KV block of 64 tokens (65536 bytes each on this rank)")
    expect("a request too long for the budget", ["--tokens-per-block", "4", "--kv-cache-memory", "16K"], 1,
           "request 2: 34 tokens of KV cache (its context and max_new_tokens) need 9 blocks of 4 tokens, more than "
           "the 4 of the budget (raise --kv-cache-memory)",
           rows=lines + [{"ids": list(range(1, 31)), "max_new_tokens": 4}])
    r = subprocess.run([FTX, "chat", "-m", os.path.join(ENGINE, "gpt2_bpe", "1-gpu"), "--tokens-per-block", "3"],
                       input="hi\n", capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "--tokens-per-block 3 is not a power of two" in r.stderr, f"chat: {r.stderr!r}")


def main():
    tests = {"budget": test_budget, "tp": test_tp, "errors": test_errors}
    if len(sys.argv) != 2 or sys.argv[1] not in tests:
        sys.exit(f"usage: paged_test.py {{{'|'.join(tests)}}}")
    with tempfile.TemporaryDirectory() as tmp:
        tests[sys.argv[1]](tmp)
    finish(f"paged_test {sys.argv[1]}")


if __name__ == "__main__":
    main()
