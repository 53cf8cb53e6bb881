#!/usr/bin/python3
"""`ftx generate` on requests a user gets wrong, and on a model whose activations overflow.

Parts (argv[1]):
  prompts:    JSONL with a byte-order mark, a JSON array, "[INST]" text, an empty prompts file,
              --output equal to --prompts
  non_finite: weights that are finite but so large that the activations overflow: every request's
              result says "finish_reason": "non_finite_logits" and "error" naming the request and
              step, nothing is drawn from the NaN logits, the job exits 1 with one error line;
              greedy, sampling and beam search; eval-lambada names the first example; the untouched
              model still runs clean
Environment: FTX_BIN, FTX_FIXTURES (engine/ and convert/ fixtures), FTX_SOURCE_DIR.
"""
import glob
import json
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, error_lines, finish, ftx, one_line_error, write  # noqa: E402

FIX = os.environ["FTX_FIXTURES"]
BPE = os.path.join(FIX, "engine", "gpt2_bpe", "1-gpu")     # GPT-2 tokenizer, fp16
MEGATRON = os.path.join(FIX, "engine", "megatron", "1-gpu")  # bf16


def test_prompts(tmp):
    out = os.path.join(tmp, "out.jsonl")

    def gen(prompts, *extra):
        return ftx("generate", "-m", BPE, "--prompts", prompts, "--max-new-tokens", "4", "--output", "-", "--quiet",
                   *extra)

    # JSONL written by a Windows editor: a byte-order mark before the first "{".
    bom = write(os.path.join(tmp, "bom.jsonl"),
                '\ufeff{"text": "Hello", "max_new_tokens": 2}\n{"text": "World", "max_new_tokens": 3}\n', "w")
    r = gen(bom)
    res = [json.loads(l) for l in r.stdout.splitlines()] if r.returncode == 0 else []
    check(r.returncode == 0 and [len(x["output_ids"]) for x in res] == [2, 3] and [x["input_length"] for x in res] == [1, 1],
          f"JSONL with a BOM: {r.returncode} {r.stderr!r} {res}")
    # A JSON array of requests and strings: each element is a request.
    arr = write(os.path.join(tmp, "arr.json"),
                json.dumps([{"text": "Hello", "max_new_tokens": 2}, "World", {"ids": [1, 2], "max_new_tokens": 1}], indent=1))
    r = gen(arr)
    res = [json.loads(l) for l in r.stdout.splitlines()] if r.returncode == 0 else []
    check(r.returncode == 0 and [len(x["output_ids"]) for x in res] == [2, 4, 1] and res[2]["input_length"] == 2,
          f"a JSON array: {r.returncode} {r.stderr!r} {res}")
    one_line_error("a broken JSON array", gen(write(os.path.join(tmp, "broken.json"), '[{"text": "a"},')), 1,
                   "broken.json: starts like a JSON array of prompts but is not valid JSON")
    one_line_error("a JSON array of numbers", gen(write(os.path.join(tmp, "nums.json"), '[{"ids": [1]}, 5]')), 1,
                   "nums.json: element 2 (prompt 2): expected a request object or a text string, not 5")
    # Text that starts with a bracket stays text.
    inst = write(os.path.join(tmp, "inst.txt"), "[INST] Hello [/INST]\n")
    r = gen(inst)
    check(r.returncode == 0 and json.loads(r.stdout)["input_length"] > 3, f"[INST] text: {r.stderr!r}")
    # An empty prompts file: a warning, an empty output, no nonsense timings.
    empty = write(os.path.join(tmp, "empty.txt"), "")
    r = ftx("generate", "-m", BPE, "--prompts", empty, "--max-new-tokens", "4", "--output", out)
    check(r.returncode == 0 and r.stderr.strip() == f"ftx: warning: {empty} has no prompts; {out} holds no results"
          and open(out).read() == "", f"an empty prompts file: {r.returncode} {r.stderr!r}")
    os.remove(out)
    # --output naming the prompts file (also through another path): refused, the prompts kept.
    p = write(os.path.join(tmp, "p.txt"), "Hello\n")
    for o in (p, os.path.join(tmp, ".", "p.txt"), os.path.join(tmp, "link.txt")):
        if o.endswith("link.txt") and not os.path.exists(o):
            os.symlink(p, o)
        r = ftx("generate", "-m", BPE, "--prompts", p, "--max-new-tokens", "4", "--output", o, "--force")
        one_line_error(f"--output {o}", r, 2, "is the same file as --prompts")
        check(open(p).read() == "Hello\n", "the prompts file is untouched")
    r = ftx("eval-lambada", "-m", BPE, "--data", p, "--output", p)
    one_line_error("eval-lambada --output = --data", r, 2, "is the same file as --data")


def huge_weights_model(tmp):
    """MEGATRON with every weight of layer 1's dense_h_to_4h at 3e38 (finite in bf16: the load check
    passes) and no manifest.json (no checksum to catch the edit): the FFN's sums overflow to Inf,
    the next layernorm makes every logit NaN."""
    d = os.path.join(tmp, "huge")
    shutil.copytree(MEGATRON, d)
    if os.path.exists(os.path.join(d, "manifest.json")):
        os.remove(os.path.join(d, "manifest.json"))
    path = os.path.join(d, "model.layers.1.mlp.dense_h_to_4h.weight.0.bin")
    n = os.path.getsize(path) // 2
    bf16 = struct.pack("<f", 3e38)[2:]  # the upper half of the fp32 bits: 3.0e38 rounded down in bf16
    write(path, bf16 * n, "wb")
    return d


def test_non_finite(tmp):
    csv = write(os.path.join(tmp, "ids.csv"), "5,6,7\n8,9\n10,11,12,13\n")
    out = os.path.join(tmp, "out.jsonl")
    # The untouched model: clean results, exit 0.
    r = ftx("generate", "-m", MEGATRON, "--input-ids", csv, "--max-new-tokens", "4", "--output", out, "--quiet")
    lines = [json.loads(ln) for ln in open(out)] if r.returncode == 0 else []
    check(r.returncode == 0 and len(lines) == 3 and all("error" not in j for j in lines),
          f"the untouched model: {r.returncode} {r.stderr.strip()!r}")
    huge = huge_weights_model(tmp)
    for name, extra in [("greedy", []), ("top-k", ["--top-k", "5", "--seed", "3"]), ("beams", ["--beam-width", "2"])]:
        if os.path.exists(out):
            os.remove(out)
        r = ftx("generate", "-m", huge, "--input-ids", csv, "--max-new-tokens", "4", "--output", out, "--quiet",
                "--return-log-probs", "--return-cum-log-probs", *extra)
        errs = error_lines(r)
        check(r.returncode == 1 and len(errs) == 1 and len(r.stderr.splitlines()) == 1,
              f"{name}: exit {r.returncode}, stderr {r.stderr.strip()!r} (one error line wanted)")
        check(any("request 1: the logits of step 0 are not finite (NaN or +Inf)" in e and "3 results" in e for e in errs),
              f"{name}: the error names the first request, its step and the count: {errs!r}")
        if not check(os.path.exists(out), f"{name}: every result is written"):
            continue
        lines = [json.loads(ln) for ln in open(out)]
        check(len(lines) == 3, f"{name}: {len(lines)} results")
        for i, j in enumerate(lines):
            check(j.get("finish_reason") == "non_finite_logits" and j.get("output_ids") == []
                  and f"request {i + 1}: the logits of step 0" in j.get("error", ""),
                  f"{name}: result {i}: {j!r}")
            # Nothing drawn, so no log probability: output_log_probs empty (present: asked for) and
            # cum_log_prob a number, in the result and every beam (a NaN is written as null).
            for res in [j] + j.get("beams", []):
                check(res.get("output_log_probs") == [] and isinstance(res.get("cum_log_prob"), (int, float)),
                      f"{name}: result {i}: log probs of nothing drawn, or null: {res!r}")
        print(f"{name}: {errs[0] if errs else '(no error)'}")
    # eval-lambada: the same overflow in an fp32 copy of the GPT-2-tokenizer model (its fp16 files
    # cannot hold a value that overflows fp32 arithmetic) is an error naming the first example.
    import numpy as np
    d = os.path.join(tmp, "huge_bpe")
    shutil.copytree(BPE, d)
    if os.path.exists(os.path.join(d, "manifest.json")):
        os.remove(os.path.join(d, "manifest.json"))
    for f in glob.glob(os.path.join(d, "model.*.bin")):
        np.fromfile(f, np.float16).astype(np.float32).tofile(f)
    write(os.path.join(d, "config.ini"), open(os.path.join(d, "config.ini")).read().replace(
        "weight_data_type = fp16", "weight_data_type = fp32"))
    path = os.path.join(d, "model.layers.0.mlp.dense_h_to_4h.weight.0.bin")
    np.full(os.path.getsize(path) // 4, 3e38, np.float32).tofile(path)
    ev = os.path.join(tmp, "ev.jsonl")
    r = ftx("eval-lambada", "-m", d, "--max-examples", "4", "--batch-size", "2", "--output", ev, "--quiet")
    one_line_error("eval-lambada, overflowing activations", r, 1, "example 1: the model's logits are not finite")
    check("accuracy" not in r.stdout, f"no summary of garbage: {r.stdout!r}")
    r = ftx("eval-lambada", "-m", BPE, "--max-examples", "4", "--batch-size", "2", "--quiet")
    check(r.returncode == 0 and "accuracy" in r.stdout, f"the untouched model evaluates: {r.stderr!r}")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"prompts": test_prompts, "non_finite": test_non_finite}[what](tmp)
    finish(f"requests_test {what}")


if __name__ == "__main__":
    main()
