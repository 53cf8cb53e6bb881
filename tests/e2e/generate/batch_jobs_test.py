#!/usr/bin/python3
"""Batch jobs at scale (issue 15), end to end on the engine fixtures.

Usage: batch_jobs_test.py {resume|streams|rss|mixed|continuous|tp|tinyvocab|badvalues}
  resume:     a multi-batch `generate` killed with SIGKILL (and stopped with SIGTERM) part way, rerun
              with --resume, gives a file byte-identical to an uninterrupted run (greedy and seeded
              top-p); the same for eval-lambada; a changed input or option with --resume is a one-line
              error; a leftover .partial without --resume is refused.
  streams:    "-", /dev/stdout (a pipe and a redirected file), a FIFO and a pipe receive the JSON lines
              of every subcommand with an output file flag and are left what they were; "-" reads
              standard input for every input file flag.
  rss:        peak RSS of generate over 100k short prompts is within 1.2x of its RSS over 1k.
  mixed:      per-request JSON parameters in one batch give the tokens of one-request-per-run runs
              with the same values as flags (greedy, top-k, top-p with seeds, penalties, stop and bad
              words, min_length, end_id, temperature 0); log probs within 1e-5.
  continuous: continuous batching gives the tokens of one-by-one runs and of static batching,
              with requests of several beam widths interleaved.
  tp:         under `mpirun -np 2`: continuous batching of mixed requests gives the tokens of TP 1
              one-by-one; a run stopped with SIGTERM and resumed gives the uninterrupted file; a bad
              request stops both ranks with the same error.
  tinyvocab:  a Megatron folder whose end_id (50256) lies outside its 128-token vocabulary generates,
              with a warning naming config.ini and --end-id.
  badvalues:  each bad flag, JSON field or config value is a one-line error, exit 1 or 2, within a few
              seconds, with no process killed by a signal.
Environment: FTX_BIN, FTX_FIXTURES (engine, convert and lambada fixtures), FTX_SOURCE_DIR.
"""
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.environ["FTX_FIXTURES"]
ENGINE = os.path.join(FIX, "engine")
GPT2 = os.path.join(ENGINE, "gpt2", "1-gpu")       # ids only, vocab 301
BPE = os.path.join(ENGINE, "gpt2_bpe", "1-gpu")    # with GPT-2's tokenizer


def ftx(*args, binary=False, **kw):
    """Runs ftx; text output unless binary (then stdout/stderr are bytes and input may be bytes)."""
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 120)
    return subprocess.run([FTX, *args], text=not binary, **kw)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def random_csv(path, n, seed=0, vocab=300, longest=8):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            f.write(",".join(str(rng.randrange(1, vocab)) for _ in range(rng.randint(1, longest))) + "\n")
    return path


def lines_of(path):
    with open(path, "rb") as f:
        return f.read().count(b"\n")


# ---- resume ----

def kill_part_way(args, partial, sig, min_lines):
    """Starts `ftx generate|eval-lambada args`, sends `sig` once `partial` holds min_lines results."""
    p = subprocess.Popen([FTX, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(partial) and lines_of(partial) >= min_lines:
            p.send_signal(sig)
            break
        time.sleep(0.002)
    out, err = p.communicate(timeout=60)
    return p.returncode, err.decode()


def test_resume(tmp):
    csv = random_csv(os.path.join(tmp, "prompts.csv"), 20000)
    for name, extra in [("greedy", []), ("top-p", ["--top-p", "0.9", "--top-k", "0", "--seed", "7"])]:
        base = ["generate", "-m", GPT2, "--input-ids", csv, "--max-new-tokens", "8", "--batch-size", "8",
                "--threads", "1", "--quiet", *extra]
        ref = os.path.join(tmp, f"ref-{name}.jsonl")
        r = ftx(*base, "--output", ref)
        if not check(r.returncode == 0, f"{name}: uninterrupted run: {r.stderr}"):
            continue
        for sig in (signal.SIGKILL, signal.SIGTERM):
            out = os.path.join(tmp, f"out-{name}-{sig.name}.jsonl")
            rc, err = kill_part_way([*base, "--output", out], out + ".partial", sig, 1000)
            check(rc == (-9 if sig == signal.SIGKILL else 128 + 15),
                  f"{name} {sig.name}: exit {rc} ({err.strip()})")
            if sig == signal.SIGTERM:
                check("run again with --resume" in err, f"{name} SIGTERM: message {err.strip()!r}")
            check(not os.path.exists(out) and os.path.exists(out + ".partial"),
                  f"{name} {sig.name}: the killed run left {os.listdir(tmp)}")
            kept = lines_of(out + ".partial")
            check(0 < kept < 20000, f"{name} {sig.name}: {kept} results kept")
            # Without --resume the leftover is refused, and left alone.
            r = ftx(*base, "--output", out)
            check(r.returncode == 1 and "--resume continues it" in r.stderr and lines_of(out + ".partial") == kept,
                  f"{name} {sig.name}: rerun without --resume: {r.returncode} {r.stderr.strip()}")
            r = ftx(*base, "--output", out, "--resume")
            check(r.returncode == 0, f"{name} {sig.name}: --resume: {r.stderr.strip()}")
            same = r.returncode == 0 and open(out, "rb").read() == open(ref, "rb").read()
            check(same, f"{name} {sig.name}: resumed file differs from the uninterrupted run")
            check(not os.path.exists(out + ".partial") and not os.path.exists(out + ".partial.index"),
                  f"{name} {sig.name}: .partial files left after the resumed run")

    # A changed input, or a changed option, with --resume: one-line errors naming the prompt.
    base = ["generate", "-m", GPT2, "--max-new-tokens", "8", "--batch-size", "8", "--threads", "1", "--quiet"]
    out = os.path.join(tmp, "changed.jsonl")
    rc, _ = kill_part_way([*base, "--input-ids", csv, "--output", out], out + ".partial", signal.SIGKILL, 500)
    changed = os.path.join(tmp, "changed.csv")
    with open(csv) as f:
        rows = f.read().splitlines()
    rows[10] = "5,6,7"
    write(changed, "\n".join(rows) + "\n")
    r = ftx(*base, "--input-ids", changed, "--output", out, "--resume")
    check(r.returncode == 1 and r.stderr.count("\n") == 1 and "prompt 11" in r.stderr and "the input changed" in r.stderr,
          f"changed input: {r.returncode} {r.stderr.strip()!r}")
    r = ftx(*base, "--input-ids", csv, "--output", out, "--resume", "--top-k", "3")
    check(r.returncode == 1 and "prompt 1 " in r.stderr and "the input changed" in r.stderr,
          f"changed option: {r.returncode} {r.stderr.strip()!r}")
    # What changes results without changing a request (the trial's G-11: a bf16 run resumed in fp32
    # mixed the two): refused, naming it; what does not (threads, batch size, block size, budget) is not.
    for flag, value, needle in [("--dtype", "bf16", 'dtype: "float32" then, "bfloat16" now'),
                                ("--memory-len", "16", "memory_len: 0 then, 16 now")]:
        r = ftx(*base, "--input-ids", csv, "--output", out, "--resume", flag, value)
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and "was written by a different run" in r.stderr
              and needle in r.stderr, f"resume with {flag} {value}: {r.returncode} {r.stderr.strip()!r}")
    # --int8-lm-head beside --int8-mode 1 (the partial run had neither): both named.
    r = ftx(*base, "--input-ids", csv, "--output", out, "--resume", "--int8-mode", "1", "--int8-lm-head")
    check(r.returncode == 1 and r.stderr.count("\n") == 1 and "was written by a different run" in r.stderr
          and "int8_lm_head: null then, true now" in r.stderr, f"resume with --int8-lm-head: {r.returncode} {r.stderr.strip()!r}")
    other = list(base)
    other[other.index("--threads") + 1] = "2"
    other[other.index("--batch-size") + 1] = "3"
    r = ftx(*other, "--input-ids", csv, "--output", out, "--resume", "--dtype", "fp32", "--tokens-per-block", "16",
            "--kv-cache-memory", "64M")
    check(r.returncode == 0, f"unchanged input still resumes: {r.stderr.strip()}")
    r = ftx(*base, "--input-ids", csv, "--output", out, "--resume")
    check(r.returncode == 1 and "is complete already" in r.stderr, f"--resume of a finished run: {r.stderr.strip()}")

    # eval-lambada --output: killed part way, resumed: the same per-example file and the same summary.
    model = os.path.join(ENGINE, "gpt2_bpe", "1-gpu")
    ev = ["eval-lambada", "-m", model, "--max-examples", "600", "--batch-size", "4", "--threads", "1", "--quiet"]
    ref, ref_sum = os.path.join(tmp, "lambada-ref.jsonl"), os.path.join(tmp, "lambada-ref.json")
    r = ftx(*ev, "--output", ref, "--summary-json", ref_sum)
    if check(r.returncode == 0, f"eval-lambada: {r.stderr.strip()}"):
        out, summ = os.path.join(tmp, "lambada.jsonl"), os.path.join(tmp, "lambada.json")
        rc, _ = kill_part_way([*ev, "--output", out, "--summary-json", summ], out + ".partial", signal.SIGKILL, 100)
        kept = lines_of(out + ".partial") if os.path.exists(out + ".partial") else 0
        check(rc == -9 and 0 < kept < 600, f"eval-lambada killed: exit {rc}, {kept} kept")
        r = ftx(*ev, "--output", out, "--summary-json", summ, "--resume", "--dtype", "bf16")
        check(r.returncode == 1 and 'dtype: "float32" then, "bfloat16" now' in r.stderr
              and lines_of(out + ".partial") == kept, f"eval-lambada resumed in bf16: {r.returncode} {r.stderr.strip()!r}")
        r = ftx(*ev, "--output", out, "--summary-json", summ, "--resume")
        check(r.returncode == 0 and open(out, "rb").read() == open(ref, "rb").read(),
              f"eval-lambada resumed file differs: {r.stderr.strip()}")
        if r.returncode == 0:
            a, b = json.load(open(ref_sum)), json.load(open(summ))
            for k in ("examples", "last_token_correct", "word_correct", "word_tokens"):
                check(a[k] == b[k], f"eval-lambada resumed summary {k}: {b[k]} != {a[k]}")
            check(abs(a["mean_word_logprob"] - b["mean_word_logprob"]) < 1e-9, "eval-lambada resumed log-likelihood")


# ---- streams ----

def fifo_capture(path):
    """Creates a FIFO at path and reads it in a thread; returns (thread, holder)."""
    os.mkfifo(path)
    got = {}

    def reader():
        with open(path, "rb") as f:
            got["data"] = f.read()
    t = threading.Thread(target=reader)
    t.start()
    return t, got


def test_streams(tmp):
    csv = random_csv(os.path.join(tmp, "p.csv"), 30)
    gen = ["generate", "-m", GPT2, "--max-new-tokens", "4", "--quiet"]
    ref_path = os.path.join(tmp, "ref.jsonl")
    r = ftx(*gen, "--input-ids", csv, "--output", ref_path)
    if not check(r.returncode == 0, f"reference run: {r.stderr}"):
        return
    ref = open(ref_path, "rb").read()

    def outputs_agree(what, make_args, reference, keep=lambda data: data):
        """make_args(target) -> argv; the output must reach '-', /dev/stdout, a FIFO, a pipe.
        keep: the part of what was received that is compared (eval-lambada prints a timed summary
        on stdout too)."""
        via_path = reference
        # "-": standard output (a pipe to us).
        r = ftx(*make_args("-"), binary=True)
        check(r.returncode == 0 and keep(r.stdout) == reference, f"{what} -: exit {r.returncode} {r.stderr[-300:]!r}")
        # /dev/stdout when stdout is a pipe, and when it is a file the shell opened.
        r = ftx(*make_args("/dev/stdout"), binary=True)
        check(r.returncode == 0 and keep(r.stdout) == reference, f"{what} /dev/stdout (pipe): {r.stderr[-300:]!r}")
        redirected = os.path.join(tmp, "redirected.out")
        with open(redirected, "wb") as f:
            r = ftx(*make_args("/dev/stdout"), stdout=f, capture_output=False, stderr=subprocess.PIPE, binary=True)
        check(r.returncode == 0 and keep(open(redirected, "rb").read()) == reference,
              f"{what} /dev/stdout (file): {r.stderr[-300:]!r}")
        check(os.path.islink("/dev/stdout"), f"{what}: /dev/stdout is still a symlink")
        # A FIFO: written in place, still a FIFO afterwards.
        fifo = os.path.join(tmp, "out.fifo")
        t, got = fifo_capture(fifo)
        r = ftx(*make_args(fifo), binary=True)
        t.join(30)
        check(r.returncode == 0 and keep(got.get("data", b"")) == via_path, f"{what} FIFO: {r.stderr[-300:]!r}")
        check(stat.S_ISFIFO(os.stat(fifo).st_mode), f"{what}: the FIFO was replaced")
        os.remove(fifo)
        # A pipe given as a path (/dev/fd/N of a pipe we hold).
        rd, wr = os.pipe()
        r = ftx(*make_args(f"/dev/fd/{wr}"), pass_fds=(wr,), binary=True)
        os.close(wr)
        data = b""
        while True:
            chunk = os.read(rd, 1 << 16)
            if not chunk:
                break
            data += chunk
        os.close(rd)
        check(r.returncode == 0 and keep(data) == via_path, f"{what} pipe /dev/fd/N: {r.stderr[-300:]!r}")

    outputs_agree("generate --output", lambda o: [*gen, "--input-ids", csv, "--output", o], ref)
    # Inputs on standard input.
    r = ftx(*gen, "--input-ids", "-", "--output", "-", input=open(csv, "rb").read(), binary=True)
    check(r.returncode == 0 and r.stdout == ref, f"generate --input-ids -: {r.stderr}")
    jsonl = "".join(json.dumps({"ids": [int(x) for x in l.split(",")]}) + "\n" for l in open(csv).read().splitlines())
    r = ftx(*gen, "--prompts", "-", "--output", "-", input=jsonl.encode(), binary=True)
    check(r.returncode == 0 and r.stdout == ref, f"generate --prompts - (JSON lines): {r.stderr}")
    # An existing regular output needs --force and is then replaced whole.
    existing = write(os.path.join(tmp, "existing.jsonl"), "old\n")
    r = ftx(*gen, "--input-ids", csv, "--output", existing)
    check(r.returncode == 1 and "--force" in r.stderr and open(existing).read() == "old\n",
          f"existing output without --force: {r.stderr.strip()}")
    # A symlink to a regular file stays a symlink; its target gets the results.
    target = os.path.join(tmp, "target.jsonl")
    link = os.path.join(tmp, "link.jsonl")
    write(target, "old\n")
    os.symlink(target, link)
    r = ftx(*gen, "--input-ids", csv, "--output", link, "--force")
    check(r.returncode == 0 and os.path.islink(link) and open(target, "rb").read() == ref,
          f"symlinked output: {r.stderr.strip()}")

    # eval-lambada: --output, --summary-json and --data -.
    ev = ["eval-lambada", "-m", BPE, "--max-examples", "12", "--batch-size", "4", "--quiet"]  # max_pos 512
    ref_path = os.path.join(tmp, "lambada.jsonl")
    sum_path = os.path.join(tmp, "lambada.json")
    r = ftx(*ev, "--output", ref_path, "--summary-json", sum_path, binary=True)
    if check(r.returncode == 0, f"eval-lambada: {r.stderr}"):
        lref = open(ref_path, "rb").read()
        results_only = lambda data: b"".join(l for l in data.splitlines(True) if not l.startswith(b"[INFO]"))
        outputs_agree("eval-lambada --output", lambda o: [*ev, "--output", o], lref, results_only)
        data = os.path.join(os.environ["FTX_SOURCE_DIR"], "data", "lambada", "lambada_test.jsonl")
        with open(data, "rb") as f:
            head = b"".join(f.readline() for _ in range(12))
        r2 = ftx(*ev, "--data", "-", "--output", "-", input=head, binary=True)
        check(r2.returncode == 0 and results_only(r2.stdout) == lref, f"eval-lambada --data -: {r2.stderr}")
        summ = json.load(open(sum_path))
        r3 = ftx(*ev, "--summary-json", "-", binary=True)
        j = json.loads(r3.stdout[r3.stdout.index(b"{"):]) if r3.returncode == 0 and b"{" in r3.stdout else {}
        check(j.get("word_correct") == summ["word_correct"], f"eval-lambada --summary-json -: {r3.stderr}")

    # tokenize: --output targets, --input -.
    texts = "".join(json.dumps({"text": t}) + "\n" for t in ["Hello world", "The quick brown fox", "ftx"])
    tin = write(os.path.join(tmp, "texts.jsonl"), texts)
    r = ftx("tokenize", "--tokenizer", BPE, "--input", tin, "--quiet", binary=True)
    if check(r.returncode == 0, f"tokenize: {r.stderr}"):
        outputs_agree("tokenize --output", lambda o: ["tokenize", "--tokenizer", BPE, "--input", tin, "--output", o,
                                                      "--quiet"], r.stdout)
        r2 = ftx("tokenize", "--tokenizer", BPE, "--input", "-", "--output", "-", "--quiet", input=texts.encode(),
                 binary=True)
        check(r2.returncode == 0 and r2.stdout == r.stdout, f"tokenize --input -: {r2.stderr}")

    # inspect and convert-nemo read a checkpoint on standard input.
    nemo = os.path.join(FIX, "convert", "nemo_tp1_tgz", "model.nemo")
    r = ftx("inspect", nemo, binary=True)
    r2 = ftx("inspect", "-", input=open(nemo, "rb").read(), binary=True)
    check(r.returncode == 0 and r2.returncode == 0 and r.stdout == r2.stdout and r.stdout,
          f"inspect -: {r2.stderr.strip()}")
    a, b = os.path.join(tmp, "nemo-file"), os.path.join(tmp, "nemo-stdin")
    r = ftx("convert-nemo", "-i", nemo, "-o", a, "-q")
    r2 = ftx("convert-nemo", "-i", "-", "-o", b, "-q", input=open(nemo, "rb").read(), binary=True)
    ok = r.returncode == 0 and r2.returncode == 0
    if check(ok, f"convert-nemo -i -: {r.stderr.strip()} {r2.stderr.strip()}"):
        for name in sorted(os.listdir(os.path.join(a, "1-gpu"))):
            if name == "manifest.json":
                continue  # names its source path
            check(open(os.path.join(a, "1-gpu", name), "rb").read() == open(os.path.join(b, "1-gpu", name), "rb").read(),
                  f"convert-nemo -i -: {name} differs")
    r = ftx("convert-hf", "-i", "-", "-o", os.path.join(tmp, "x"))
    check(r.returncode == 2 and "is a folder" in r.stderr, f"convert-hf -i -: {r.stderr.strip()}")
    r = ftx("convert-nemo", "-i", nemo, "-o", "-")
    check(r.returncode == 2 and "cannot be standard output" in r.stderr, f"convert -o -: {r.stderr.strip()}")
    # gemm-tune refuses an existing output before tuning (here: before finding no GPU).
    existing = write(os.path.join(tmp, "gemm_config.in"), "old\n")
    r = ftx("gemm-tune", "--head-num", "4", "--size-per-head", "16", "--inter-size", "256", "--vocab-size", "301",
            "--batch-size", "1", "--beam-width", "1", "--max-input-len", "8", "--data-type", "fp32", "-o", existing)
    check(r.returncode == 1 and "exists; use --force" in r.stderr and open(existing).read() == "old\n",
          f"gemm-tune existing output: {r.stderr.strip()}")


# ---- rss ----

def peak_rss_kb(args):
    r = subprocess.run(["/usr/bin/time", "-f", "%M", FTX, *args], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, r.stderr
    return int(r.stderr.strip().splitlines()[-1]), r.stderr


def test_rss(tmp):
    small = random_csv(os.path.join(tmp, "1k.csv"), 1000, seed=1, longest=4)
    large = random_csv(os.path.join(tmp, "100k.csv"), 100000, seed=2, longest=4)
    args = ["generate", "-m", GPT2, "--max-new-tokens", "2", "--batch-size", "16", "--threads", "1", "--quiet"]
    a, ea = peak_rss_kb([*args, "--input-ids", small, "--output", os.path.join(tmp, "1k.jsonl")])
    b, eb = peak_rss_kb([*args, "--input-ids", large, "--output", os.path.join(tmp, "100k.jsonl")])
    if not check(a is not None and b is not None, f"rss runs failed: {ea} {eb}"):
        return
    print(f"peak RSS: 1k prompts {a} KiB, 100k prompts {b} KiB, ratio {b / a:.3f}")
    check(b <= 1.2 * a, f"peak RSS over 100k prompts {b} KiB > 1.2 x {a} KiB over 1k")
    check(lines_of(os.path.join(tmp, "100k.jsonl")) == 100000, "100k results written")


# ---- mixed per-request parameters ----

MIXED = [
    {},                                                                   # flags' defaults: greedy
    {"top_k": 5, "seed": 11, "return_log_probs": True},
    {"top_p": 0.8, "seed": 12, "return_log_probs": True},
    {"top_k": 20, "top_p": 0.5, "temperature": 0.7, "seed": 13},
    {"repetition_penalty": 1.5, "max_new_tokens": 12},
    {"presence_penalty": 0.8, "top_k": 3, "seed": 14},
    {"min_length": 6, "end_id": 201, "max_new_tokens": 9},
    {"end_id": 115, "max_new_tokens": 12},
    {"stop_words": [[216, 216]], "max_new_tokens": 10},
    {"bad_words": [[201], [76, 76]], "max_new_tokens": 7},
    {"temperature": 0, "top_k": 40, "seed": 15},
    {"repetition_penalty": 1.3, "presence_penalty": 0.4, "frequency_penalty": 0.6, "top_k": 3, "seed": 16},
    {"top_p": 0.9, "top_p_decay": 0.5, "top_p_min": 0.2, "top_p_reset_ids": 201, "seed": 17},
    {"max_new_tokens": 1},
]

FLAG = {"top_k": "--top-k", "top_p": "--top-p", "temperature": "--temperature", "seed": "--seed",
        "repetition_penalty": "--repetition-penalty", "presence_penalty": "--presence-penalty",
        "min_length": "--min-length", "end_id": "--end-id", "max_new_tokens": "--max-new-tokens",
        "frequency_penalty": "--frequency-penalty", "top_p_decay": "--top-p-decay", "top_p_min": "--top-p-min",
        "top_p_reset_ids": "--top-p-reset-ids"}


def test_mixed(tmp):
    prompts = [[201], [259, 161, 200, 61], [188, 2, 148, 265, 60, 89, 275], [210, 19, 299, 193, 57, 48, 17, 203]]
    reqs = []
    for i, params in enumerate(MIXED):
        for p in prompts:
            reqs.append(dict(params, ids=p))
    path = write(os.path.join(tmp, "mixed.jsonl"), "".join(json.dumps(r) + "\n" for r in reqs))
    out = os.path.join(tmp, "mixed-out.jsonl")
    r = ftx("generate", "-m", GPT2, "--prompts", path, "--max-new-tokens", "8", "--batch-size", "16", "--output", out,
            "--quiet")
    if not check(r.returncode == 0, f"mixed batch: {r.stderr}"):
        return
    got = [json.loads(l) for l in open(out)]
    for i, req in enumerate(reqs):
        # The same request alone, its parameters given as flags (word lists as a one-line JSON file).
        args = ["generate", "-m", GPT2, "--output", "-", "--quiet"]
        if "max_new_tokens" not in req:
            args += ["--max-new-tokens", "8"]
        alone = {"ids": req["ids"]}
        for k, v in req.items():
            if k in FLAG:
                args += [FLAG[k], str(v)]
            elif k == "return_log_probs":
                args += ["--return-log-probs"]
            elif k in ("stop_words", "bad_words"):
                alone[k] = v
        args += ["--prompts", write(os.path.join(tmp, "one.jsonl"), json.dumps(alone) + "\n")]
        one = ftx(*args)
        if not check(one.returncode == 0, f"request {i} alone: {one.stderr}"):
            continue
        want = json.loads(one.stdout)
        check(got[i]["output_ids"] == want["output_ids"] and got[i]["finish_reason"] == want["finish_reason"],
              f"request {i} {req}: batch {got[i]['output_ids']} {got[i]['finish_reason']} != alone "
              f"{want['output_ids']} {want['finish_reason']}")
        if "output_log_probs" in want:
            d = max((abs(a - b) for a, b in zip(got[i]["output_log_probs"], want["output_log_probs"])), default=0)
            check(d <= 1e-5, f"request {i}: log probs differ by {d}")
    # The per-request values had an effect: greedy, sampled and penalised requests differ.
    first = [g["output_ids"] for g in got[0:4]]
    check(any([g["output_ids"] for g in got[4 * k:4 * k + 4]] != first for k in range(1, len(MIXED))),
          "per-request parameters changed nothing")
    check(all(len(g["output_ids"]) <= 1 for g in got[-4:]), "max_new_tokens 1 per request")
    check(all(g["finish_reason"] == "stop_words" or len(g["output_ids"]) == 10 for g in got[32:36]),
          "stop words per request")


# ---- continuous batching ----

def test_continuous(tmp):
    rng = random.Random(5)
    reqs = []
    for i in range(60):
        r = {"ids": [rng.randrange(1, 300) for _ in range(rng.randint(1, 10))], "max_new_tokens": rng.randint(1, 24),
             "seed": i, "return_log_probs": True}
        if i % 3 == 1:
            r.update(top_p=0.9)
        if i % 5 == 2:
            r.update(end_id=rng.randrange(1, 300))
        if 20 <= i < 30 or i in (45, 50):
            r = {"ids": r["ids"], "max_new_tokens": r["max_new_tokens"], "beam_width": 3}
        reqs.append(r)
    for model in ["gpt2", "gptneox", "bloom"]:
        m = os.path.join(ENGINE, model, "1-gpu")
        path = write(os.path.join(tmp, "reqs.jsonl"), "".join(json.dumps(r) + "\n" for r in reqs))
        runs = {}
        for name, extra in [("one-by-one", ["--batch-size", "1"]), ("continuous", ["--batch-size", "5"]),
                            ("static", ["--batch-size", "5", "--batching", "static"])]:
            r = ftx("generate", "-m", m, "--prompts", path, "--max-new-tokens", "8", "--output", "-", "--quiet", *extra)
            if check(r.returncode == 0, f"{model} {name}: {r.stderr}"):
                runs[name] = [json.loads(l) for l in r.stdout.splitlines()]
        if len(runs) != 3:
            continue
        for name in ("continuous", "static"):
            for i, (a, b) in enumerate(zip(runs["one-by-one"], runs[name])):
                beams = [[x["output_ids"] for x in r.get("beams", [])] for r in (a, b)]
                check(a["output_ids"] == b["output_ids"] and beams[0] == beams[1],
                      f"{model} {name}: request {i} differs from one-by-one")
                d = max((abs(x - y) for x, y in zip(a.get("output_log_probs", []), b.get("output_log_probs", []))),
                        default=0)
                check(d <= 1e-5, f"{model} {name}: request {i} log probs differ by {d}")
        lengths = {len(x["output_ids"]) for x in runs["continuous"]}
        check(len(lengths) > 5, f"{model}: requests of many lengths ({sorted(lengths)})")


# ---- tensor parallelism ----

def mpirun(n, *args, popen=False):
    cmd = [shutil.which("mpirun") or "mpirun", "-np", str(n), "--oversubscribe", "--allow-run-as-root",
           "-x", "OMP_NUM_THREADS=1", FTX, *args]
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_tp(tmp):
    rng = random.Random(9)
    reqs = []
    for i in range(30):
        r = {"ids": [rng.randrange(1, 300) for _ in range(rng.randint(1, 9))], "max_new_tokens": rng.randint(1, 16),
             "seed": i}
        if i % 3 == 1:
            r.update(top_k=5)
        if 10 <= i < 14:
            r = {"ids": r["ids"], "max_new_tokens": r["max_new_tokens"], "beam_width": 2}
        reqs.append(r)
    path = write(os.path.join(tmp, "reqs.jsonl"), "".join(json.dumps(r) + "\n" for r in reqs))
    for model in ["gptneox", "bloom"]:
        one = ftx("generate", "-m", os.path.join(ENGINE, model, "1-gpu"), "--prompts", path, "--max-new-tokens", "8",
                  "--batch-size", "1", "--output", "-", "--quiet")
        two = mpirun(2, "generate", "-m", os.path.join(ENGINE, model, "2-gpu"), "--prompts", path, "--max-new-tokens",
                     "8", "--batch-size", "4", "--output", "-", "--quiet")
        if not check(one.returncode == 0 and two.returncode == 0, f"{model} TP: {one.stderr} {two.stderr}"):
            continue
        a = [json.loads(l)["output_ids"] for l in one.stdout.splitlines()]
        b = [json.loads(l)["output_ids"] for l in two.stdout.splitlines()]
        check(a == b, f"{model}: continuous batching at TP 2 differs from TP 1 one-by-one")
    # Stopped under mpirun (SIGTERM reaches every rank), resumed under mpirun: the same file.
    csv = random_csv(os.path.join(tmp, "p.csv"), 40000)
    base = ["generate", "-m", os.path.join(ENGINE, "gpt2", "2-gpu"), "--input-ids", csv, "--max-new-tokens", "8",
            "--batch-size", "8", "--quiet"]
    ref = os.path.join(tmp, "ref.jsonl")
    r = mpirun(2, *base, "--output", ref)
    if not check(r.returncode == 0, f"TP 2 reference: {r.stderr}"):
        return
    out = os.path.join(tmp, "out.jsonl")
    p = mpirun(2, *base, "--output", out, popen=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(out + ".partial") and lines_of(out + ".partial") >= 2000:
            p.send_signal(signal.SIGTERM)
            break
        time.sleep(0.005)
    p.communicate(timeout=120)
    kept = lines_of(out + ".partial") if os.path.exists(out + ".partial") else 0
    check(0 < kept < 40000 and not os.path.exists(out), f"TP 2 stopped: {kept} results kept")
    r = mpirun(2, *base, "--output", out, "--resume")
    check(r.returncode == 0 and open(out, "rb").read() == open(ref, "rb").read(),
          f"TP 2 resumed file differs: {r.stderr.strip()}")
    # A bad request mid-stream stops every rank with the same error, no hang.
    bad = write(os.path.join(tmp, "bad.jsonl"), json.dumps({"ids": [1]}) + "\n" + json.dumps({"ids": [2], "top_k": -1}) + "\n")
    r = mpirun(2, "generate", "-m", os.path.join(ENGINE, "gpt2", "2-gpu"), "--prompts", bad, "--max-new-tokens", "2",
               "--output", os.path.join(tmp, "bad.out"))
    check(r.returncode != 0 and r.stderr.count("line 2 (prompt 2): top_k -1 outside [0, 1024]") == 2,
          f"TP 2 bad request: {r.returncode} {r.stderr.strip()!r}")


# ---- tiny vocabulary ----

def test_tinyvocab(tmp):
    out = os.path.join(tmp, "meg")
    r = ftx("convert-megatron", "-i", os.path.join(FIX, "convert", "meg_v3_tp1"), "-o", out, "-q")
    check(r.returncode == 0 and "end_id = 50256 is outside the vocabulary [0, 128)" in r.stderr and "--end-id" in r.stderr,
          f"convert-megatron warns: {r.returncode} {r.stderr.strip()!r}")
    csv = write(os.path.join(tmp, "p.csv"), "1,2,3\n4\n")
    r = ftx("generate", "-m", os.path.join(out, "1-gpu"), "--input-ids", csv, "--max-new-tokens", "5", "--output", "-",
            "--quiet")
    check(r.returncode == 0 and "config.ini: end_id 50256 is outside the vocabulary [0, 128)" in r.stderr
          and "--end-id" in r.stderr, f"tiny-vocab generate: {r.returncode} {r.stderr.strip()!r}")
    res = [json.loads(l) for l in r.stdout.splitlines()] if r.returncode == 0 else []
    check(len(res) == 2 and all(len(x["output_ids"]) == 5 and x["finish_reason"] == "length" for x in res),
          f"tiny-vocab results: {res}")
    # --end-id sets an id inside the vocabulary: no warning.
    r = ftx("convert-megatron", "-i", os.path.join(FIX, "convert", "meg_v3_tp1"), "-o", out, "-q", "--force",
            "--start-id", "0", "--end-id", "1")
    check(r.returncode == 0 and "warning" not in r.stderr, f"convert-megatron --end-id 1: {r.stderr.strip()}")
    cfg = open(os.path.join(out, "1-gpu", "config.ini")).read()
    check("end_id = 1\n" in cfg and "start_id = 0\n" in cfg, "convert-megatron --start-id/--end-id written")


# ---- bad values ----

def test_badvalues(tmp):
    csv = write(os.path.join(tmp, "p.csv"), "1,2,3\n4\n")
    out = os.path.join(tmp, "out.jsonl")
    base = ["generate", "-m", GPT2, "--input-ids", csv, "--max-new-tokens", "4", "--output", out]

    def expect(name, args, code, needle, stdin=None):
        t0 = time.time()
        r = ftx(*args, timeout=30, input=stdin)
        dt = time.time() - t0
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        ok = r.returncode == code and len(lines) == 1 and lines[0].startswith("ftx: error:") and needle in lines[0]
        check(ok and dt < 10, f"{name}: exit {r.returncode}, {dt:.1f} s, stderr {lines!r} (wanted {code}, {needle!r})")
        check(not os.path.exists(out) and not os.path.exists(out + ".partial"), f"{name}: output left behind")

    expect("--top-p 5", [*base, "--top-p", "5"], 2, "--top-p 5 outside [0, 1]")
    expect("--top-k 2000", [*base, "--top-k", "2000"], 2, "--top-k 2000 outside [0, 1024]")
    expect("--temperature -1", [*base, "--temperature", "-1"], 2, "--temperature -1 must be >= 0")
    expect("--threads -3", [*base, "--threads", "-3"], 2, "--threads -3 is negative")
    expect("--beam-width 10000", [*base, "--beam-width", "10000"], 2, "--beam-width 10000 outside [1, 64]")
    expect("--batch-size 0", [*base, "--batch-size", "0"], 2, "--batch-size 0 outside")
    expect("--max-new-tokens 0", [*base[:-4], "--max-new-tokens", "0", "--output", out], 2, "--max-new-tokens")
    expect("--repetition-penalty 0", [*base, "--repetition-penalty", "0"], 2, "--repetition-penalty 0 must be > 0")
    expect("--frequency-penalty nan", [*base, "--frequency-penalty", "nan"], 2, "--frequency-penalty nan is not finite")
    expect("--top-p-decay 0", [*base, "--top-p", "0.9", "--top-p-decay", "0"], 2, "--top-p-decay 0 outside (0, 1]")
    expect("--top-p-min 1.5", [*base, "--top-p", "0.9", "--top-p-min", "1.5"], 2, "--top-p-min 1.5 outside (0, 1]")
    expect("--top-p-reset-ids 999", [*base, "--top-p", "0.9", "--top-p-reset-ids", "999"], 2,
           "--top-p-reset-ids 999 outside the vocabulary")
    expect("--top-p-reset-ids -5", [*base, "--top-p", "0.9", "--top-p-reset-ids", "-5"], 2,
           "--top-p-reset-ids -5 is not a token id")
    expect("--top-p-decay with top-k", [*base, "--top-k", "4", "--top-p-decay", "0.5"], 2,
           "--top-p-decay 0.5 has no effect outside top-p sampling (--top-k 0, --top-p > 0")
    expect("--min-length -1", [*base, "--min-length", "-1"], 2, "--min-length -1 is negative")
    expect("--max-seq-len -1", [*base, "--max-seq-len", "-1"], 2, "--max-seq-len -1 is negative")
    expect("--start-id 999", [*base, "--start-id", "999"], 2, "--start-id 999 is outside the vocabulary")
    expect("beam + temperature 0", [*base, "--beam-width", "2", "--temperature", "0"], 2, "temperature 0")
    expect("--resume --force", [*base, "--resume", "--force"], 2, "give one")
    expect("--resume to a pipe", [*base[:-1], "-", "--resume"], 2, "--resume needs a regular output file")
    expect("--stream --output -", [*base[:-1], "-", "--stream"], 2, "would both write to standard output")
    expect("--batching", [*base, "--batching", "eager"], 2, "--batching")
    expect("KV cache too large", [*base, "--batch-size", "65536", "--max-seq-len", "1000000"], 1,
           "out of memory before allocating")
    # JSON lines: the line, the prompt and the field are named.
    def jl(*objs):
        return write(os.path.join(tmp, "bad.jsonl"), "".join(json.dumps(o) + "\n" for o in objs))
    g = ["generate", "-m", GPT2, "--max-new-tokens", "4", "--output", out]
    expect("JSON top_p", [*g, "--prompts", jl({"ids": [1]}, {"ids": [2]}, {"ids": [3], "top_p": 5})], 1,
           "bad.jsonl: line 3 (prompt 3): top_p 5 outside [0, 1]")
    expect("JSON unknown field", [*g, "--prompts", jl({"ids": [1], "max_new_token": 3})], 1,
           "unknown field \"max_new_token\" (did you mean \"max_new_tokens\"?)")
    expect("JSON wrong type", [*g, "--prompts", jl({"ids": [1], "top_k": "many"})], 1, "\"top_k\" must be an integer")
    expect("JSON beam width", [*g, "--prompts", jl({"ids": [1], "beam_width": 10000})], 1, "beam_width 10000 outside")
    expect("JSON no prompt", [*g, "--prompts", jl({"top_k": 1})], 1, "give exactly one of \"text\" and \"ids\"")
    expect("JSON seed", [*g, "--prompts", jl({"ids": [1], "seed": -4})], 1, "\"seed\" must be a non-negative integer")
    expect("JSON not JSON", [*g, "--prompts", write(os.path.join(tmp, "nj.jsonl"), "{\"ids\": [1]}\n{oops\n")], 1,
           "nj.jsonl: line 2 (prompt 2): not JSON")
    expect("too long for positions", [*g, "--input-ids", write(os.path.join(tmp, "long.csv"), ",".join(["1"] * 62))],
           1, "62 prompt tokens + 4 new tokens = 66 exceeds the model's max_pos_seq_len 64")
    # config.ini sizes: checked against the files before anything is allocated.
    # Past 2^24 the config.ini check refuses the value itself (lib/model/config_ini_check).
    for key, value, needle in [("num_layer", "3", "num_layer = 3, but the folder has weight files for 2"),
                               ("num_layer", "100000000", "[gpt] num_layer = 100000000: must be at least 1 (and at most"),
                               ("vocab_size", "100000000000", "[gpt] vocab_size = 100000000000: must be at least 1"),
                               ("head_num", "4000000", "head_num x size_per_head")]:
        d = os.path.join(tmp, f"bad-{key}-{value}")
        shutil.copytree(GPT2, d)
        cfgp = os.path.join(d, "config.ini")
        text = open(cfgp).read().splitlines()
        text = [f"{key} = {value}" if l.startswith(f"{key} =") else l for l in text]
        write(cfgp, "\n".join(text) + "\n")
        expect(f"config {key}", ["generate", "-m", d, "--input-ids", csv, "--max-new-tokens", "4", "--output", out], 1,
               needle)
    # Subcommands: a mistyped one is named, with the closest.
    r = ftx("genrate", "-m", GPT2)
    check(r.returncode == 2 and "unknown subcommand 'genrate'; did you mean 'generate'?" in r.stderr,
          f"mistyped subcommand: {r.stderr!r}")
    r = ftx("--help")
    check(r.returncode == 0 and "CPU or CUDA" in r.stdout and "(CPU;" not in r.stdout, "ftx --help describes generate")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"resume": test_resume, "streams": test_streams, "rss": test_rss, "mixed": test_mixed,
         "continuous": test_continuous, "tinyvocab": test_tinyvocab, "badvalues": test_badvalues,
         "tp": test_tp}[what](tmp)
    finish(f"batch_jobs_test {what}")


if __name__ == "__main__":
    main()
