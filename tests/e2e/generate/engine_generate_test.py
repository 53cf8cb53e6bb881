#!/usr/bin/python3
"""End-to-end checks of `ftx generate` on the engine fixtures (scripts/fixtures/make_engine_models.py).

Usage: engine_generate_test.py {cli|tp|errors}
  cli:    greedy output_ids equal the float64 reference's greedy continuation for every fixture
          model; --batch-size 1 equals one batch; output fields (sequence_length, finish_reason,
          log probs, context embeddings, beams, text, stream lines, stop words).
  tp:     `mpirun -np 2` on the 2-gpu folders gives the same output file as 1 rank on 1-gpu.
  errors: each bad input is exit code 1 with an `ftx: error:` line naming the problem.
Environment: FTX_BIN, FTX_FIXTURES (fixtures in $FTX_FIXTURES/engine).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "engine")
MODELS = ["gpt2", "megatron", "gptnext", "santacoder", "gptj", "gptneox", "bloom", "opt_post"]


def run(args, mpi=0):
    cmd = ([shutil.which("mpirun") or "mpirun", "-np", str(mpi), "--oversubscribe", "--allow-run-as-root"]
           if mpi else []) + [FTX, "generate"] + args
    env = dict(os.environ, OMP_NUM_THREADS="1" if mpi else os.environ.get("OMP_NUM_THREADS", "2"))
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def generate(tmp, model_dir, extra=(), mpi=0, name="out.jsonl", csv=None):
    out = os.path.join(tmp, name)
    csv = csv or os.path.join(os.path.dirname(model_dir), "start_ids.csv")
    r = run(["-m", model_dir, "--input-ids", csv, "--max-new-tokens", "6", "--output", out, "--force", "--quiet", *extra],
            mpi)
    if r.returncode != 0:
        check(False, f"{model_dir} {extra}: exit {r.returncode}: {r.stderr.strip()}")
        return None, r
    with open(out) as f:
        return [json.loads(l) for l in f], r


def test_cli(tmp):
    for m in MODELS:
        exp = json.load(open(os.path.join(FIX, m, "expected.json")))
        res, _ = generate(tmp, os.path.join(FIX, m, "1-gpu"))
        if res is None:
            continue
        check([r["index"] for r in res] == list(range(len(exp["prompts"]))), f"{m}: indices in input order")
        for i, r in enumerate(res):
            check(r["output_ids"] == exp["greedy"][i], f"{m} prompt {i}: {r['output_ids']} != reference {exp['greedy'][i]}")
            check(r["input_length"] == len(exp["prompts"][i]), f"{m} prompt {i}: input_length")
            check(r["sequence_length"] == r["input_length"] + len(r["output_ids"]), f"{m} prompt {i}: sequence_length")
            want = "end_id" if r["output_ids"][-1:] == [exp["end_id"]] else "length"
            check(r["finish_reason"] == want, f"{m} prompt {i}: finish_reason {r['finish_reason']}")
        one, _ = generate(tmp, os.path.join(FIX, m, "1-gpu"), ["--batch-size", "1"], name="one.jsonl")
        check(one == res, f"{m}: --batch-size 1 differs from one batch")
        # --dtype bf16|fp16 on the CPU: weights held in half; greedy tokens of the float64 emulation
        # (tests/reference/half_reference.py) for the fixtures that carry one.
        for dt in ("bf16", "fp16") if "half_weights" in exp else ():
            half, _ = generate(tmp, os.path.join(FIX, m, "1-gpu"), ["--dtype", dt], name=f"{dt}.jsonl")
            for i, r in enumerate(half or []):
                want = exp["half_weights"][dt]["greedy"][i]
                check(r["output_ids"] == want, f"{m} --dtype {dt} prompt {i}: {r['output_ids']} != emulation {want}")

    # Optional fields.
    m = os.path.join(FIX, "gpt2", "1-gpu")
    res, _ = generate(tmp, m, ["--return-log-probs", "--return-cum-log-probs", "--return-context-embeddings"])
    for r in res or []:
        check(len(r["output_log_probs"]) == len(r["output_ids"]), "output_log_probs length")
        # Greedy is top-k with k=1: FT renormalises over the k candidates, so each step is log 1 = 0,
        # while cum_log_prob sums the full-vocabulary log probabilities
        # (docs/runtime.md#sampling-and-log-probabilities).
        check(all(abs(lp) < 1e-6 for lp in r["output_log_probs"]), "greedy output_log_probs are 0")
        check(r["cum_log_prob"] < 0, "cum_log_prob < 0")
        check(len(r["context_embedding"]) == 64, "context_embedding has H values")
    res, _ = generate(tmp, m, ["--beam-width", "3"])
    for r in res or []:
        check(len(r["beams"]) == 3 and r["beams"][0]["output_ids"] == r["output_ids"], "beams: 3, best first")
    # Streaming: one line per new token of each prompt, on stdout, before the summary.
    _, rr = generate(tmp, m, ["--stream"])
    lines = [json.loads(l) for l in rr.stdout.splitlines() if l.strip()]
    res, _ = generate(tmp, m)
    for i, r in enumerate(res or []):
        toks = [l["token"] for l in lines if l["index"] == i]
        check(toks == r["output_ids"], f"stream of prompt {i}: {toks} != {r['output_ids']}")

    # Text prompts, "text" output and stop words with the GPT-2 tokenizer.
    bpe = os.path.join(FIX, "gpt2_bpe", "1-gpu")
    prompts = os.path.join(tmp, "prompts.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps({"text": "Hello world, this is"}) + "\n" + json.dumps({"text": "The quick brown"}) + "\n")
    out = os.path.join(tmp, "text.jsonl")
    r = run(["-m", bpe, "--prompts", prompts, "--max-new-tokens", "4", "--output", out, "--force", "--quiet"])
    check(r.returncode == 0, f"text prompts: {r.stderr}")
    if r.returncode == 0:
        res = [json.loads(l) for l in open(out)]
        check(len(res) == 2 and all("text" in x for x in res), "text prompts give text outputs")
        check(res[0]["input_length"] == 5, f"'Hello world, this is' is 5 GPT-2 tokens, got {res[0]['input_length']}")
        # Stop at the second generated token: its text, tokenized alone, must be that one token.
        tok = subprocess.run([FTX, "tokenize", "--tokenizer", bpe, "--decode", "--quiet"], capture_output=True,
                             text=True, input=json.dumps({"ids": [res[0]["output_ids"][1]]}) + "\n")
        piece = json.loads(tok.stdout)["text"] if tok.returncode == 0 else None
        enc = subprocess.run([FTX, "tokenize", "--tokenizer", bpe, "--quiet"], capture_output=True, text=True,
                             input=json.dumps({"text": piece}) + "\n") if piece else None
        if enc is not None and enc.returncode == 0 and json.loads(enc.stdout)["ids"] == [res[0]["output_ids"][1]]:
            with open(prompts, "w") as f:
                f.write(json.dumps({"text": "Hello world, this is"}) + "\n")
            quoted = '"' + piece.replace('"', '""') + '"'
            r = run(["-m", bpe, "--prompts", prompts, "--max-new-tokens", "4", "--output", out, "--force", "--quiet",
                     "--stop-words", quoted + ",unrelated words"])
            s = [json.loads(l) for l in open(out)][0] if r.returncode == 0 else {}
            first = res[0]["output_ids"].index(res[0]["output_ids"][1])  # generation stops at its first occurrence
            check(s.get("finish_reason") == "stop_words" and s.get("output_ids") == res[0]["output_ids"][:first + 1],
                  f"stop word {piece!r}: {s}")
        else:
            print("note: stop-word check skipped (second token does not re-tokenize alone)")


def test_tp(tmp):
    for m in ["gpt2", "gptnext", "santacoder", "gptj", "gptneox", "bloom"]:
        one, _ = generate(tmp, os.path.join(FIX, m, "1-gpu"), ["--return-log-probs"], name="tp1.jsonl")
        two, _ = generate(tmp, os.path.join(FIX, m, "2-gpu"), ["--return-log-probs"], mpi=2, name="tp2.jsonl")
        if one is None or two is None:
            continue
        for a, b in zip(one, two):
            check(a["output_ids"] == b["output_ids"], f"{m}: TP2 tokens {b['output_ids']} != TP1 {a['output_ids']}")
            check(all(abs(x - y) <= 1e-4 for x, y in zip(a["output_log_probs"], b["output_log_probs"])),
                  f"{m}: TP2 log probs differ from TP1")


def test_errors(tmp):
    m = os.path.join(FIX, "gpt2", "1-gpu")

    def expect_error(name, args, needle):
        """needle: the text the error must contain, or a tuple of acceptable texts."""
        r = run(args)
        needles = needle if isinstance(needle, tuple) else (needle,)
        ok = r.returncode == 1 and "ftx: error:" in r.stderr and any(n in r.stderr for n in needles)
        check(ok, f"{name}: exit {r.returncode}, stderr {r.stderr.strip()!r} (wanted {needle!r})")

    def csv(name, text):
        p = os.path.join(tmp, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    out = os.path.join(tmp, "err.jsonl")
    base = ["--max-new-tokens", "4", "--output", out]
    expect_error("id >= vocab", ["-m", m, "--input-ids", csv("big.csv", "1,2,301\n"), *base],
                 "big.csv: line 1 (prompt 1): token id 301 is outside the vocabulary [0, 301)")
    expect_error("negative id", ["-m", m, "--input-ids", csv("neg.csv", "5\n-1\n"), *base],
                 "neg.csv: line 2 (prompt 2): token id -1 is outside the vocabulary")
    expect_error("empty prompt", ["-m", m, "--input-ids", csv("empty.csv", "1,2\n\n3\n"), *base],
                 "empty.csv: line 2 (prompt 2): empty prompt")
    expect_error("not an id", ["-m", m, "--input-ids", csv("bad.csv", "1,x\n"), *base], "bad.csv: line 1 (prompt 1): 'x' is not a token id")
    expect_error("beyond max_pos_seq_len", ["-m", m, "--input-ids", csv("long.csv", ",".join(["1"] * 60) + "\n"),
                                            "--max-new-tokens", "5", "--output", out],
                 "60 prompt tokens + 5 new tokens = 65 exceeds the model's max_pos_seq_len 64")
    # A build without CUDA says so; a CUDA build on a machine without a GPU says that.
    module = os.path.join(os.path.dirname(FTX), "libftx_cuda.so")
    if not os.path.exists("/dev/nvidia0"):
        expect_error("cuda", ["-m", m, "--input-ids", csv("ok.csv", "1,2\n"), *base, "--device", "cuda"],
                     ("no CUDA device found",) if os.path.exists(module) else
                     ("the CUDA backend is not built in this version",))
    if os.path.exists(module):
        # ftx loads its CUDA module on first use (lib/ops/cuda_module.h): the binary itself does not
        # load cuBLASLt, which every CPU command would otherwise pay for at start-up.
        libs = subprocess.run(["ldd", FTX], capture_output=True, text=True).stdout
        check("libcublas" not in libs and "libcudart" not in libs,
              f"ftx links the CUDA libraries directly: {[l.split()[0] for l in libs.splitlines() if 'cu' in l]}")
        # A copy of the binary without its module says what is missing, not that CUDA is not built in.
        alone = os.path.join(tmp, "alone")
        os.makedirs(alone)
        shutil.copy(FTX, alone)
        r = subprocess.run([os.path.join(alone, "ftx"), "generate", "-m", m, "--input-ids", csv("ok.csv", "1,2\n"),
                            *base, "--device", "cuda"], capture_output=True, text=True)
        check(r.returncode == 1 and "libftx_cuda.so, is neither beside it" in r.stderr and "copy it along" in r.stderr,
              f"ftx without its module: exit {r.returncode}, {r.stderr.strip()!r}")
        # A module that cannot be loaded (here: not a shared library at all) is named, with the loader's reason.
        with open(os.path.join(alone, "libftx_cuda.so"), "w") as f:
            f.write("not an ELF file\n")
        r = subprocess.run([os.path.join(alone, "ftx"), "generate", "-m", m, "--input-ids", csv("ok.csv", "1,2\n"),
                            *base, "--device", "cuda"], capture_output=True, text=True)
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and "libftx_cuda.so: cannot load the CUDA backend: " in r.stderr,
              f"ftx with a broken module: exit {r.returncode}, {r.stderr.strip()!r}")
    # gemm_config.in picks GPU GEMM algorithms: naming one for the CPU backend is a usage error (exit 2).
    r = run(["-m", m, "--input-ids", csv("ok.csv", "1,2\n"), *base, "--gemm-config", csv("gemm_config.in", "")])
    check(r.returncode == 2 and "--gemm-config applies to --device cuda only" in r.stderr,
          f"gemm-config on cpu: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    expect_error("tp mismatch", ["-m", os.path.join(FIX, "gpt2", "2-gpu"), "--input-ids", csv("ok.csv", "1,2\n"), *base],
                 "model folder was converted for tensor parallel size 2; run with `mpirun -np 2`")

    def broken(name, mutate):
        d = os.path.join(tmp, name)
        shutil.copytree(m, d)
        mutate(d)
        return d

    d = broken("missing", lambda d: os.remove(os.path.join(d, "model.layers.0.attention.dense.weight.0.bin")))
    expect_error("missing weight", ["-m", d, "--input-ids", csv("ok.csv", "1,2\n"), *base],
                 "model.layers.0.attention.dense.weight.0.bin: missing weight file (expected 8192 bytes, fp16 [64, 64])")
    d = broken("short", lambda d: os.truncate(os.path.join(d, "model.wte.bin"), 100))
    expect_error("truncated weight", ["-m", d, "--input-ids", csv("ok.csv", "1,2\n"), *base],
                 "model.wte.bin: 100 bytes, expected 38528 (fp16 [301, 64] from config.ini)")

    def drop_key(d):
        p = os.path.join(d, "config.ini")
        text = open(p).read().replace("head_num = 4\n", "")
        open(p, "w").write(text)
    d = broken("nokey", drop_key)
    expect_error("config key", ["-m", d, "--input-ids", csv("ok.csv", "1,2\n"), *base], "head_num")
    check(not os.path.exists(out), "no output file is left behind by a failed run")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"cli": test_cli, "tp": test_tp, "errors": test_errors}[what](tmp)
    finish(f"engine_generate_test {what}")


if __name__ == "__main__":
    main()
