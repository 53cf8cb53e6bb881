#!/usr/bin/python3
"""What a second new user tripped over (issue 38, from a user trial), each with its bad input and
the error or behaviour wanted.

Parts (argv[1]):
  logits:   weights that are finite but so large that the activations overflow (the trial's R-1):
            every request's result says "finish_reason": "non_finite_logits" and "error" naming the
            request and step, nothing is drawn from the NaN logits, the job exits 1 with one error
            line; greedy, sampling and beam search; eval-lambada names the first example; the
            untouched model still runs clean
  inspect:  `ftx inspect` of Megatron Core's torch_dist checkpoints (the committed fixtures of
            tests/fixtures/mcore, written by megatron-core): the iteration folder, the .nemo that holds
            one in model_weights/ and its extracted folder list every tensor (a split tensor chunk by
            chunk, with --stats summing to the same totals as the legacy layout's shards); a .distcp
            file alone gets a one-line error naming the folder to inspect
  verify:   `inspect --verify` checks what loading checks (the trial's E-13..E-17): config.ini edits
            (num_layer, dtype, tensor_para_size) that generate refuses, manifest records whose own
            dtype/shape/bytes disagree or repeat, a path that does not exist
  flags:    --kv-cache-memory 1.5 (not bytes) and 1 (all the memory), --seed with greedy decoding,
            an empty field in --input-ids, plain text into ftx tokenize, a bad prompt part way
            through a file (the results kept, and how to resume), SIGINT before the first result,
            SIGINT while smoothquant calibrates; every `ftx generate` example of the man pages has
            its required --output
  spellings: TensorRT-LLM's and vLLM's flag spellings get the ftx flag that does the same, or why
            there is none (never an unrelated "did you mean"); gemm-tune with a few of gpt_gemm's
            positional arguments
  allowlist: TransformerEngine 1.x `_extra_state` (io.BytesIO) in Megatron Core shards, and the
            pathlib.PosixPath torch's own FileSystemWriter records in `.metadata`: both convert, to
            the same files as the fixtures they were made from, with no code run
  convert:  a NaN in the source checkpoint (HF and Megatron Core), and bf16 weights beyond fp16's range
            converted with -t fp16: refused at conversion, naming the source tensor (generate's
            "convert the model again" could not help), nothing left; a virtual-pipeline swiglu
            shard, torch_dist folders and .nemo without .metadata, Megatron Core names under
            mcore_gpt: false: each named for what it is
  chat_tty: ftx chat on a terminal (tmux): a line beyond the model's positions, and a full context,
            are refused and the chat goes on (/reset starts over); exit 77 without tmux
Environment: FTX_BIN, FTX_FIXTURES (engine/ and convert/ fixtures), FTX_SOURCE_DIR.
"""
import glob
import io
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import check, finish, one_line_error  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.environ["FTX_FIXTURES"]
SRC = os.environ["FTX_SOURCE_DIR"]
MEGATRON = os.path.join(FIX, "engine", "megatron", "1-gpu")  # bf16, vocab 300, 3 layers, no tokenizer
NEOX = os.path.join(FIX, "engine", "gptneox", "1-gpu")        # rotary: no position table
BPE = os.path.join(FIX, "engine", "gpt2_bpe", "1-gpu")        # GPT-2 tokenizer, 512 positions
HF_BIN = os.path.join(FIX, "convert", "hf_gpt2_bin", "model")
MCORE = os.path.join(SRC, "tests", "fixtures", "mcore")


def ftx(*args, cwd=None, input=None, timeout=120):
    return subprocess.run([FTX, *args], capture_output=True, text=True, cwd=cwd, input=input, timeout=timeout)


def write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
    return path


def extracted(archive, folder):
    """A .nemo (tar) extracted into folder."""
    with tarfile.open(archive) as tf:
        tf.extractall(folder)
    return folder


def error_lines(r):
    return [ln for ln in r.stderr.splitlines() if ln.startswith("ftx: error:")]


# ---- logits ----

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


def test_logits(tmp):
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


# ---- inspect ----

def inspect_lines(*args):
    r = ftx("inspect", *args)
    return r, [ln.split("\t") for ln in r.stdout.splitlines() if ln.strip()]


def abs_sum(*args):
    """Sum of inspect --stats --json's abs_sum over the tensors (TransformerEngine's _extra_state
    bytes left out), or None when inspect failed."""
    r = ftx("inspect", "--stats", "--json", *args)
    if r.returncode != 0:
        return None
    rows = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
    return sum(j["abs_sum"] for j in rows if "_extra_state" not in j["name"])


def test_inspect(tmp):
    it = "iter_0000010"
    for model in ("classic", "modern"):
        # Every layout holds the same weights (tests/fixtures/mcore/SOURCE.md): the TP 1 legacy
        # shard's total is what every torch_dist folder must list, each element once.
        want = abs_sum(os.path.join(MCORE, model, "megatron", "tp1pp1", "legacy", it, "mp_rank_00", "model_optim_rng.pt"))
        for layout in ("tp1pp1", "tp2pp1", "tp2pp2"):
            dist = os.path.join(MCORE, model, "megatron", layout, "dist", it)
            r, rows = inspect_lines(dist)
            names = [row[0] for row in rows]
            check(r.returncode == 0 and any(n.startswith("embedding.word_embeddings.weight") for n in names)
                  and any(n.startswith("decoder.layers.") for n in names),
                  f"inspect {model}/{layout} dist: {r.returncode} {r.stderr.strip()!r} {names[:4]}")
            got = abs_sum(dist)
            check(want is not None and got is not None and abs(got - want) <= 1e-9 * want,
                  f"inspect --stats {model}/{layout} dist: abs_sum {got}, the legacy shard's {want}")
            # A .distcp shard alone: where to look instead.
            distcp = sorted(f for f in os.listdir(dist) if f.endswith(".distcp"))[0]
            r = ftx("inspect", os.path.join(dist, distcp))
            errs = error_lines(r)
            check(r.returncode == 1 and len(errs) == 1 and "a shard of a torch_dist checkpoint" in errs[0]
                  and f"ftx inspect {dist}" in errs[0], f"inspect a .distcp: {r.returncode} {r.stderr.strip()!r}")
    # The distributed .nemo, as an archive and extracted: the tensors of model_weights/.
    nemo = os.path.join(MCORE, "modern", "nemo", "tp2pp1_dist.nemo")
    r, rows = inspect_lines(nemo)
    names = [row[0] for row in rows]
    check(r.returncode == 0 and any(n.startswith("model_weights/model.decoder.layers.") for n in names)
          and any(n.startswith("model_weights/model.embedding.word_embeddings.weight") for n in names),
          f"inspect a dist .nemo: {r.returncode} {r.stderr.strip()!r} {names[:4]}")
    stage = extracted(nemo, os.path.join(tmp, "nemo"))
    r2, rows2 = inspect_lines(stage)
    check(r2.returncode == 0 and [row[0] for row in rows2] == names,
          f"inspect the extracted .nemo lists the same: {r2.returncode} {r2.stderr.strip()!r}")
    r, _ = inspect_lines("--stats", nemo)
    check(r.returncode == 0 and "sum=" in r.stdout, f"inspect --stats of a dist .nemo: {r.stderr.strip()!r}")


# ---- verify ----

def edited_copy(src, dst, config=None, manifest=None):
    """A copy of folder src with config.ini lines replaced ({old: new}) and manifest.json edited
    (a function of the parsed JSON)."""
    shutil.copytree(src, dst)
    if config:
        text = open(os.path.join(dst, "config.ini")).read()
        for a, b in config.items():
            check(a in text, f"{dst}: config.ini has no {a!r}")
            text = text.replace(a, b)
        write(os.path.join(dst, "config.ini"), text)
    if manifest:
        m = json.load(open(os.path.join(dst, "manifest.json")))
        manifest(m)
        write(os.path.join(dst, "manifest.json"), json.dumps(m))
    return dst


def test_verify(tmp):
    conv = os.path.join(tmp, "conv")
    r = ftx("convert-hf", "-i", HF_BIN, "-o", conv, "-q")
    if not check(r.returncode == 0, f"convert-hf: {r.stderr}"):
        return
    good = os.path.join(conv, "1-gpu")
    ini = open(os.path.join(good, "config.ini")).read()
    layers = int(re.search(r"^num_layer = (\d+)", ini, re.M).group(1))
    csv = write(os.path.join(tmp, "p.csv"), "1,2,3\n")
    out = os.path.join(tmp, "out.jsonl")

    def verify_fails(name, d, *needles):
        r = ftx("inspect", "--verify", d)
        failed = [ln for ln in r.stdout.splitlines() if ": FAILED (" in ln]
        check(r.returncode == 1 and failed and all(any(n in ln for ln in failed) for n in needles),
              f"{name}: inspect --verify: exit {r.returncode}, FAILED lines {failed[:4]!r}, wanted {needles!r}")
        g = ftx("generate", "-m", d, "--input-ids", csv, "--max-new-tokens", "2", "--output", out)
        check(g.returncode != 0, f"{name}: generate loads what --verify refuses? {g.returncode} {g.stderr!r}")
        if os.path.exists(out):
            os.remove(out)

    r = ftx("inspect", "--verify", good)
    check(r.returncode == 0 and "all OK" in r.stderr, f"the converted folder verifies: {r.stderr!r}")
    # E-14: one layer fewer in config.ini: the last layer's files are described by nothing.
    d = edited_copy(good, os.path.join(tmp, "layers"), {f"num_layer = {layers}": f"num_layer = {layers - 1}",
                                                         f"n_layer = {layers}": f"n_layer = {layers - 1}"})
    verify_fails("num_layer edit", d, f"model.layers.{layers - 1}.", "config.ini describes no such tensor")
    # E-15: config.ini says fp16, the files are fp32 (as is the manifest).
    dt = re.search(r"^weight_data_type = (\w+)", ini, re.M).group(1)
    other = "fp16" if dt == "fp32" else "fp32"
    edits = {f"weight_data_type = {dt}": f"weight_data_type = {other}"}
    if "storage_dtype = " in ini:
        sd = re.search(r"^storage_dtype = (\w+)", ini, re.M).group(1)
        edits[f"storage_dtype = {sd}"] = "storage_dtype = " + ("float16" if other == "fp16" else "float32")
    d = edited_copy(good, os.path.join(tmp, "dtype"), edits)
    verify_fails("dtype edit", d, f"config.ini weight_data_type = {other}")
    # E-16: tensor_para_size 2: the .1 files config.ini implies are missing; they are not "listed in manifest.json".
    d = edited_copy(good, os.path.join(tmp, "tp2"), {"tensor_para_size = 1": "tensor_para_size = 2"})
    r = ftx("inspect", "--verify", d)
    check(r.returncode == 1 and ".1.bin: FAILED (missing (config.ini implies it" in r.stdout
          and "listed in manifest.json but missing" not in r.stdout,
          f"tensor_para_size edit: {r.stdout[-400:]!r} {r.stderr!r}")
    # E-13: the manifest's own records.
    f0 = "model.wpe.bin"

    def set_field(key, value):
        def edit(m):
            for e in m["files"]:
                if e["file"] == f0:
                    e[key] = value
        return edit
    want_dtype = "float16" if dt == "fp32" else "float32"
    for name, edit, needle in [
            ("manifest dtype", set_field("dtype", want_dtype), f"manifest.json says {want_dtype}"),
            ("manifest shape", set_field("shape", [999999999999]), "manifest.json says"),
            ("manifest bytes", set_field("bytes", -5), "manifest.json records -5 bytes"),
            ("manifest duplicate", lambda m: m["files"].append(dict(next(e for e in m["files"] if e["file"] == f0))),
             "listed twice in manifest.json")]:
        d = edited_copy(good, os.path.join(tmp, name.replace(" ", "_")), manifest=edit)
        r = ftx("inspect", "--verify", d)
        check(r.returncode == 1 and f"{f0}: FAILED ({needle}" in r.stdout, f"{name}: {r.stdout[-300:]!r}")
    # E-17: a path that does not exist.
    r = ftx("inspect", "--verify", os.path.join(tmp, "nosuch"))
    one_line_error("--verify nosuch", r, 1, "nosuch: no such file or folder")


# ---- flags ----

def test_flags(tmp):
    csv = write(os.path.join(tmp, "ids.csv"), "5,6,7\n8,9\n")
    out = os.path.join(tmp, "out.jsonl")
    base = ["generate", "-m", NEOX, "--input-ids", csv, "--max-new-tokens", "3", "--output", out]
    # C-7: 1.5 is neither a fraction in (0, 1] nor bytes: a usage error before anything is read.
    r = ftx(*base, "--kv-cache-memory", "1.5")
    one_line_error("--kv-cache-memory 1.5", r, 2, "--kv-cache-memory 1.5", "neither a fraction in (0, 1] nor a whole number of bytes")
    # C-11: 1 is all of the memory free after the weights: nothing is left for the workspaces.
    r = ftx(*base, "--kv-cache-memory", "1")
    one_line_error("--kv-cache-memory 1", r, 1, "--kv-cache-memory 1 of the available memory", "leaves", "lower --kv-cache-memory")
    check(not os.path.exists(out), "--kv-cache-memory 1: nothing written")
    # R-2: --seed with greedy decoding: an error where nothing can sample, a warning with --prompts.
    r = ftx(*base, "--seed", "3")
    one_line_error("--seed, greedy", r, 2, "--seed 3 has no effect with greedy decoding", "set --top-k or --top-p")
    r = ftx(*base, "--seed", "3", "--top-k", "4")
    check(r.returncode == 0, f"--seed with --top-k: {r.stderr!r}")
    os.remove(out)
    jl = write(os.path.join(tmp, "p.jsonl"), json.dumps({"ids": [5, 6], "top_k": 3}) + "\n")
    r = ftx("generate", "-m", NEOX, "--prompts", jl, "--max-new-tokens", "3", "--output", out, "--seed", "3", "--quiet")
    check(r.returncode == 0 and "ftx: warning: --seed 3 has no effect with greedy decoding" in r.stderr,
          f"--seed with --prompts: a warning: {r.returncode} {r.stderr!r}")
    os.remove(out)
    # #130: an empty field in --input-ids is a lost id, not padding.
    bad = write(os.path.join(tmp, "bad.csv"), "818,,262\n")
    r = ftx("generate", "-m", BPE, "--input-ids", bad, "--max-new-tokens", "3", "--output", out)
    one_line_error("--input-ids 818,,262", r, 1, "bad.csv", "line 1", "field 2 is empty")
    trailing = write(os.path.join(tmp, "trailing.csv"), "818,262,\n")
    r = ftx("generate", "-m", BPE, "--input-ids", trailing, "--max-new-tokens", "3", "--output", out, "--quiet")
    check(r.returncode == 0 and json.loads(open(out).readline())["input_length"] == 2,
          f"a trailing comma (FT's readers take it): {r.stderr!r}")
    os.remove(out)
    # #156: plain text into ftx tokenize: what a line must be.
    r = ftx("tokenize", "--tokenizer", BPE, input="plain words\n")
    one_line_error("tokenize plain text", r, 1, "line 1: not a JSON line", '{"text": "..."}', "jq -R")
    # A bad prompt part way through a file: the results before it are kept, and the message says
    # how to go on; -q is --quiet.
    lines = [json.dumps({"ids": [5, 6, i % 50 + 1]}) for i in range(30)] + [json.dumps({"ids": [5], "top_p": 5})]
    gap = write(os.path.join(tmp, "gap.jsonl"), "\n".join(lines) + "\n")
    r = ftx("generate", "-m", NEOX, "--prompts", gap, "--max-new-tokens", "2", "--batch-size", "1", "--output", out, "-q")
    one_line_error("a bad line 31", r, 1, "line 31", "top_p", "results before it are in", out + ".partial",
                   "run again with --resume")
    m = re.search(r"the (\d+) results before it", r.stderr)
    check(m and os.path.exists(out + ".partial") and sum(1 for _ in open(out + ".partial")) == int(m.group(1)) > 0,
          f"the kept results are the ones the message counts: {r.stderr!r}")
    write(gap, "\n".join(lines[:30] + [json.dumps({"ids": [5], "top_p": 0.5})]) + "\n")
    r = ftx("generate", "-m", NEOX, "--prompts", gap, "--max-new-tokens", "2", "--batch-size", "1", "--output", out, "-q",
            "--resume")
    check(r.returncode == 0 and sum(1 for _ in open(out)) == 31, f"the corrected line resumed: {r.stderr!r}")
    os.remove(out)
    # SIGINT before the first result: no .partial is named that does not exist.
    many = write(os.path.join(tmp, "many.csv"), "5,6,7\n" * 64)
    p = subprocess.Popen([FTX, "generate", "-m", NEOX, "--input-ids", many, "--max-new-tokens", "3000",
                          "--min-length", "3000", "--batch-size", "64", "--output", out],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    e2e_util.wait_for(lambda: os.path.exists(out + ".partial") or p.poll() is not None, "generate to start writing")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    check(p.returncode == 130 and "before the first result: nothing was written" in err
          and not os.path.exists(out + ".partial"), f"SIGINT before the first result: {p.returncode} {err.strip()!r}")
    # D-27: SIGINT while smoothquant calibrates names the output that was not written.
    sq = os.path.join(tmp, "sq")
    p = subprocess.Popen([FTX, "smoothquant", "-i", BPE, "-o", sq, "--alpha", "0.5", "--calib-samples", "100000",
                          "--calib-seq-len", "64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = b""
    while p.poll() is None and b"calibrat" not in seen:
        seen += p.stderr.read1(256) if hasattr(p.stderr, "read1") else p.stderr.read(1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    err = (seen + err).decode(errors="replace")
    check(p.returncode in (130, -2) and f"stopped by SIGINT (Ctrl-C): {sq}/1-gpu was not written" in err
          and not os.path.exists(os.path.join(sq, "1-gpu")), f"SIGINT in smoothquant: {p.returncode} {err[-300:]!r}")
    # The man pages' generate examples carry the flags generate requires (ftx-smoothquant(1)'s FP8 one did not).
    for page in sorted(glob.glob(os.path.join(SRC, "man", "*.1"))):
        text = open(page).read().replace("\\-", "-").replace("\\\n", " ")
        for m in re.finditer(r"^(?:mpirun [^\n]*?)?ftx generate [^\n]*", text, re.M):
            check("--output" in m.group(0) and "--max-new-tokens" in m.group(0),
                  f"{os.path.basename(page)}: an example without --output or --max-new-tokens: {m.group(0)!r}")


# ---- spellings ----

def test_spellings(tmp):
    ids = write(os.path.join(tmp, "ids.csv"), "5,6\n")
    gen = ["generate", "-m", NEOX, "--input-ids", ids, "--max-new-tokens", "2", "--output", os.path.join(tmp, "o.jsonl")]
    cases = [
        (gen + ["--paged_kv_cache"], "ftx's KV cache is always paged"),
        (gen + ["--enable-prefix-caching"], "prefix sharing on"),
        (gen + ["--block-size", "16"], "did you mean --tokens-per-block?"),
        (gen + ["--gpu-memory-utilization", "0.9"], "did you mean --kv-cache-memory?"),
        (gen + ["--kv_cache_free_gpu_mem_fraction", "0.9"], "did you mean --kv-cache-memory?"),
        (gen + ["--max_tokens_in_paged_kv_cache", "4096"], "takes bytes or a fraction, not tokens"),
        (gen + ["--enable_fp8"], "did you mean --fp8?"),
        (gen + ["--use_fp8"], "did you mean --fp8?"),
        (gen + ["--kv_cache_dtype", "fp8"], "did you mean --fp8-kv-cache or --int8-kv-cache?"),
        (gen + ["--use_weight_only"], "did you mean --int8-mode 1?"),
        (gen + ["--weight_only_precision", "int8"], "did you mean --int8-mode 1?"),
        (["smoothquant", "-i", NEOX, "-o", os.path.join(tmp, "x"), "--use_fp8"], "did you mean --fp8?"),
        (["smoothquant", "-i", NEOX, "-o", os.path.join(tmp, "x"), "--fp8_kv_cache"], "did you mean --fp8?"),
        (["smoothquant", "-i", NEOX, "-o", os.path.join(tmp, "x"), "--qformat", "fp8"], "--fp8 (qformat fp8)"),
        (["convert-megatron", "-i", "x", "-o", os.path.join(tmp, "y"), "--pp_size", "2"], "ftx writes no pipeline split"),
        (["convert-hf", "-i", HF_BIN, "-o", os.path.join(tmp, "y"), "--use_weight_only"], "ftx generate --int8-mode 1"),
    ]
    for argv, needle in cases:
        r = ftx(*argv)
        one_line_error(" ".join(argv[-2:]), r, 2, needle)
        check("--batch-size" not in r.stderr and "--format" not in r.stderr and "--int8-kv-cache?" not in r.stderr
              or "--int8-kv-cache?" in needle, f"{argv[-2:]}: an unrelated flag suggested: {r.stderr!r}")
    # #167: fewer than gpt_gemm's eight positionals: what they stand for and what is missing.
    r = ftx("gemm-tune", "-m", NEOX, "8", "1", "64", "1")
    one_line_error("gemm-tune with 4 positionals", r, 2, "not positional arguments",
                   "--batch-size 8 --beam-width 1 --max-input-len 64 --head-num 1", "--size-per-head", "are missing")
    # Mapped to the ftx flag: --tp_size and --dtype (convert_checkpoint.py), --model_dir, --nemo_ckpt_path.
    out = os.path.join(tmp, "tp")
    r = ftx("convert-hf", "--model_dir", HF_BIN, "--output_dir", out, "--tp_size", "2", "--dtype", "float16", "-q")
    check(r.returncode == 0 and os.path.exists(os.path.join(out, "2-gpu", "config.ini"))
          and "weight_data_type = fp16" in open(os.path.join(out, "2-gpu", "config.ini")).read(),
          f"convert_checkpoint.py's spellings: {r.returncode} {r.stderr!r}")
    r = ftx("convert-nemo", "--nemo_ckpt_path", os.path.join(MCORE, "classic", "nemo", "tp1pp1_dist.nemo"),
            "--output_dir", os.path.join(tmp, "nemo"), "-q")
    check(r.returncode == 0, f"--nemo_ckpt_path: {r.stderr!r}")


# ---- allow-list ----

def test_allowlist(tmp):
    import torch
    it = "iter_0000010"
    # TE 1.x: every uint8 _extra_state of the TE fixture as TE 1.x stored it, an io.BytesIO holding a
    # torch.save'd dict.
    src = os.path.join(MCORE, "te", "megatron", "tp1pp1", "legacy")
    te1 = os.path.join(tmp, "te1")
    shutil.copytree(src, te1)
    shard = os.path.join(te1, it, "mp_rank_00", "model_optim_rng.pt")
    ck = torch.load(shard)
    n = 0
    for k in list(ck["model"]):
        if k.endswith("_extra_state"):
            buf = io.BytesIO()
            torch.save({"scale_fwd": torch.ones(3), "recipe": "delayed"}, buf)
            buf.seek(0)
            ck["model"][k] = buf
            n += 1
    torch.save(ck, shard)
    check(n > 0, "the TE fixture has _extra_state entries")
    outs = {}
    for name, path in [("te2", src), ("te1", te1)]:
        outs[name] = os.path.join(tmp, "out_" + name)
        r = ftx("convert-megatron", "-i", path, "-o", outs[name], "-q")
        check(r.returncode == 0, f"convert-megatron {name}: {r.returncode} {r.stderr.strip()!r}")
    same_bins("TE 1.x BytesIO _extra_state", outs["te2"], outs["te1"])
    # PyTorch's FileSystemWriter keeps the folder in StorageMeta.checkpoint_id as a PosixPath.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dcp_pickle import load_meta, save_meta, stub_class
    import pathlib
    dist = os.path.join(MCORE, "classic", "megatron", "tp2pp1", "dist")
    pp = os.path.join(tmp, "pp")
    shutil.copytree(dist, pp)
    meta_path = os.path.join(pp, it, ".metadata")
    meta = load_meta(meta_path)
    sm = stub_class("torch.distributed.checkpoint.metadata", "StorageMeta")()
    sm.state = {"checkpoint_id": pathlib.PosixPath(os.path.join(pp, it)), "save_id": "2f6c0e", "load_id": None,
                "modules": []}
    meta.state["storage_meta"] = sm
    save_meta(meta, meta_path)
    check(b"pathlib" in open(meta_path, "rb").read(), "the .metadata names pathlib.PosixPath")
    for name, path in [("dist", dist), ("posix", pp)]:
        outs[name] = os.path.join(tmp, "out_" + name)
        r = ftx("convert-megatron", "-i", path, "-o", outs[name], "-q")
        check(r.returncode == 0, f"convert-megatron {name}: {r.returncode} {r.stderr.strip()!r}")
    same_bins("DCP .metadata with a PosixPath", outs["dist"], outs["posix"])
    # Still nothing else: pathlib's other callables stay refused.
    meta = load_meta(meta_path)
    meta.state["storage_meta"].state["checkpoint_id"] = stub_class("pathlib", "Path").__new__(stub_class("pathlib", "Path"))
    save_meta(meta, meta_path)
    r = ftx("convert-megatron", "-i", pp, "-o", os.path.join(tmp, "evil"), "-q")
    one_line_error("pathlib.Path in .metadata", r, 1, "refusing to load global 'pathlib.Path'")


def same_bins(what, a, b):
    fa = sorted(f for f in os.listdir(os.path.join(a, "1-gpu")) if f.endswith(".bin")) if os.path.isdir(a) else []
    fb = sorted(f for f in os.listdir(os.path.join(b, "1-gpu")) if f.endswith(".bin")) if os.path.isdir(b) else []
    check(fa and fa == fb and all(open(os.path.join(a, "1-gpu", f), "rb").read() == open(os.path.join(b, "1-gpu", f), "rb").read()
                                  for f in fa), f"{what}: the converted files differ ({len(fa)} vs {len(fb)})")


# ---- non-finite values at conversion ----

def test_convert(tmp):
    import torch
    src = os.path.join(HF_BIN, "pytorch_model.bin")
    sd = torch.load(src)
    name = next(k for k in sd if k.endswith("h.1.mlp.c_fc.weight"))

    def hf_copy(tag, edit):
        d = os.path.join(tmp, tag)
        shutil.copytree(HF_BIN, d)
        m = {k: v.clone() for k, v in sd.items()}
        edit(m)
        torch.save(m, os.path.join(d, "pytorch_model.bin"))
        return d

    def refused(label, argv, out, *needles):
        r = ftx(*argv)
        one_line_error(label, r, 1, *needles)
        check(not os.path.exists(out) or not os.listdir(out), f"{label}: {out} holds {os.listdir(out) if os.path.exists(out) else []}")

    # H-8: one NaN in an HF weight.
    d = hf_copy("hf_nan", lambda m: m[name].view(-1).__setitem__(7, float("nan")))
    out = os.path.join(tmp, "o_nan")
    refused("HF NaN", ["convert-hf", "-i", d, "-o", out], out, name, "1 non-finite value", "the first at element 7",
            "in the checkpoint itself")
    # H-9: a bf16 checkpoint with a weight of 1e5, to fp16 (largest finite 65504).
    def big_bf16(m):
        for k, v in list(m.items()):
            if v.is_floating_point():
                m[k] = v.to(torch.bfloat16)
        m[name].view(-1)[3] = 1e5
    d = hf_copy("hf_big", big_bf16)
    out = os.path.join(tmp, "o_big")
    refused("bf16 1e5 to fp16", ["convert-hf", "-i", d, "-o", out, "-t", "fp16"], out, name,
            "beyond float16's range (largest finite 65504)", "-t bf16 or -t fp32")
    r = ftx("convert-hf", "-i", d, "-o", os.path.join(tmp, "o_big_bf16"), "-t", "bf16", "-q")
    check(r.returncode == 0, f"the same to bf16 converts: {r.stderr!r}")
    # Megatron Core legacy shard with a NaN in linear_fc2.
    leg = os.path.join(tmp, "mc_nan")
    shutil.copytree(os.path.join(MCORE, "modern", "megatron", "tp1pp1", "legacy"), leg)
    shard = os.path.join(leg, "iter_0000010", "mp_rank_00", "model_optim_rng.pt")
    ck = torch.load(shard)
    ck["model"]["decoder.layers.1.mlp.linear_fc2.weight"].view(-1)[0] = float("nan")
    torch.save(ck, shard)
    out = os.path.join(tmp, "o_mc")
    refused("mcore NaN", ["convert-megatron", "-i", leg, "-o", out], out, "mp_rank_00:layers.1.mlp.linear_fc2.weight",
            "in the checkpoint itself")
    # a virtual-pipeline shard (model0, model1) of a swiglu model: the pipeline is named, not swiglu.
    vpp = os.path.join(tmp, "vpp")
    shutil.copytree(os.path.join(MCORE, "modern", "megatron", "tp1pp1", "legacy"), vpp)
    shard = os.path.join(vpp, "iter_0000010", "mp_rank_00", "model_optim_rng.pt")
    ck = torch.load(shard)
    ck["model0"] = ck.pop("model")
    ck["model1"] = dict(ck["model0"])
    ck["args"].virtual_pipeline_model_parallel_size = 2
    torch.save(ck, shard)
    refused("virtual pipeline, swiglu", ["convert-megatron", "-i", vpp, "-o", out], out,
            "virtual pipeline checkpoints (model0, ...) are not supported")
    # a torch_dist folder without .metadata.
    dn = os.path.join(tmp, "d-nometa")
    shutil.copytree(os.path.join(MCORE, "modern", "megatron", "tp1pp1", "dist"), dn)
    os.remove(os.path.join(dn, "iter_0000010", ".metadata"))
    refused("torch_dist without .metadata", ["convert-megatron", "-i", dn, "-o", out], out,
            "holds torch_dist chunk files", "but no .metadata")
    # B-20 (#40): a distributed .nemo without model_weights/.metadata.
    stage = extracted(os.path.join(MCORE, "modern", "nemo", "tp1pp1_dist.nemo"), os.path.join(tmp, "nemo-nometa"))
    os.remove(os.path.join(stage, "model_weights", ".metadata"))
    refused("dist .nemo without .metadata", ["convert-nemo", "-i", stage, "-o", out], out,
            "is a torch_dist chunk file, but model_weights/.metadata", "is missing")
    # B-21: Megatron Core names under mcore_gpt: false.
    stage = extracted(os.path.join(MCORE, "classic", "nemo", "tp2pp1_legacy.nemo"), os.path.join(tmp, "nemo-notmcore"))
    y = os.path.join(stage, "model_config.yaml")
    text = open(y).read()
    check("mcore_gpt: true" in text, "the fixture's yaml says mcore_gpt: true")
    write(y, text.replace("mcore_gpt: true", "mcore_gpt: false"))
    refused("mcore names, mcore_gpt false", ["convert-nemo", "-i", stage, "-o", out], out,
            "model_config.yaml says mcore_gpt: false, but the weights have Megatron Core names", "set mcore_gpt: true")


# ---- chat on a terminal ----

def test_chat_tty(tmp):
    if not shutil.which("tmux"):
        print("SKIP: tmux is not installed")
        sys.exit(77)
    with e2e_util.TmuxChat(tmp, ["-m", BPE, "--max-new-tokens", "150"], "ftxnu2") as t:
        def rounds():
            return t.stderr_lines("[round")

        def errors():
            return t.stderr_lines("ftx: error:")

        def say(text):
            t.keys(text, literal=True)
            t.keys("Enter")

        t.wait_for(lambda: t.pane().startswith(">"), "the prompt")
        say("Hello")
        t.wait_for(lambda: len(rounds()) == 1, "round 1", 60)
        # F-5: one line beyond the model's 512 positions: refused, the chat goes on.
        say("And the LORD " * 200)
        t.wait_for(lambda: len(errors()) == 1, "the refusal", 60)
        e = errors()
        check(e and "beyond the model's max_pos_seq_len 512" in e[0] and "/reset" in e[0], f"the long line: {e}")
        say("Again")
        t.wait_for(lambda: len(rounds()) == 2, "round 2 after the refusal", 60)
        check("context" in rounds()[-1] and "context 0 tokens" not in rounds()[-1],
              f"round 2 continues the session: {rounds()}")
        # F-6: the context fills up (150 new tokens a round): refused, then /reset starts over.
        for _ in range(6):
            if len(errors()) > 1:
                break
            n = len(rounds())
            say("More")
            t.wait_for(lambda: len(rounds()) > n or len(errors()) > 1, f"round {n + 1}", 60)
        e = errors()
        check(len(e) == 2 and "beyond the model's max_pos_seq_len 512" in e[1], f"the full context: {e}")
        say("/reset")
        n = len(rounds())
        say("Hello")
        t.wait_for(lambda: len(rounds()) > n, "a round after /reset", 60)
        check("context 0 tokens" in rounds()[-1], f"/reset started a new session: {rounds()[-1:]}")
        t.keys("C-d")
        t.wait_for(lambda: t.exit_status() is not None, "chat to end")
        check(t.exit_status() == "0", f"the chat ends with exit 0: {t.exit_status()!r}")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"logits": test_logits, "inspect": test_inspect, "verify": test_verify, "flags": test_flags,
         "spellings": test_spellings, "allowlist": test_allowlist, "convert": test_convert,
         "chat_tty": test_chat_tty}[what](tmp)
    finish(f"newuser2_test {what}")


if __name__ == "__main__":
    main()
