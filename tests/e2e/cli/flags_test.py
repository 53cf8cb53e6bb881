#!/usr/bin/python3
"""Every subcommand's flags as a user mistypes them: each bad value or borrowed spelling with its
one-line error (or the right behaviour) and nothing written.

Parts (argv[1]):
  values:         a table of every subcommand's numeric, path and choice flags x bad values (0,
                  negative, huge, NaN, Inf, the wrong type, empty): one line, exit 2 (1 for a file),
                  nothing written; and the cross-flag rules (min-length, beam + top-k, temperature)
  generate:       --kv-cache-memory 1.5 (not bytes) and 1 (all the memory), --seed with greedy
                  decoding, an empty field in --input-ids, plain text into ftx tokenize, a bad prompt
                  part way through a file (the results kept, and how to resume), SIGINT before the first
                  result, SIGINT while smoothquant calibrates; every `ftx generate` example of the man
                  pages has its required --output
  ft_spellings:   FasterTransformer's spellings: accepted converter flags, "did you mean" elsewhere,
                  `ftx convert`, gpt_gemm's positional arguments
  peer_spellings: TensorRT-LLM's and vLLM's flag spellings get the ftx flag that does the same, or why
                  there is none (never an unrelated "did you mean"); gemm-tune with a few of gpt_gemm's
                  positional arguments
Environment: FTX_BIN, FTX_FIXTURES (engine/ and convert/ fixtures), FTX_SOURCE_DIR.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
import e2e_util  # noqa: E402
from e2e_util import check, finish, ftx, listing, one_line_error, write  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.environ["FTX_FIXTURES"]
SRC = os.environ["FTX_SOURCE_DIR"]
BPE = os.path.join(FIX, "engine", "gpt2_bpe", "1-gpu")     # GPT-2 tokenizer, fp16
NEOX = os.path.join(FIX, "engine", "gptneox", "1-gpu")        # rotary: no position table
HF_BIN = os.path.join(FIX, "convert", "hf_gpt2_bin", "model")
MCORE = os.path.join(SRC, "tests", "fixtures", "mcore")


HUGE = "9223372036854775807"


OVER = "99999999999999999999"


BAD_INT_NONNEG = ["-1", HUGE, OVER, "nan", "inf", "abc", "", "1.5"]     # counts where 0 means "default"


BAD_INT_POS = ["0", "-1", HUGE, OVER, "nan", "inf", "abc", "", "1.5"]   # counts that must be >= 1


BAD_REAL = ["nan", "inf", "-inf", "abc", ""]


def flag_table(tmp):
    """(subcommand argv before the flag, flag, bad values, output paths that must not appear)."""
    csv = write(os.path.join(tmp, "p.csv"), "1,2\n")
    txt = write(os.path.join(tmp, "p.txt"), "Hello\n")
    out = os.path.join(tmp, "res.jsonl")
    conv_out = os.path.join(tmp, "conv")
    gen = ["generate", "-m", BPE, "--input-ids", csv, "--output", out]
    gen_n = gen + ["--max-new-tokens", "2"]
    chat = ["chat", "-m", BPE, "--input", txt]
    ev = ["eval-lambada", "-m", BPE, "--data", write(os.path.join(tmp, "l.jsonl"), '{"text": "a b c"}\n'),
          "--output", out]
    conv = ["convert-hf", "-i", HF_BIN, "-o", conv_out, "-q"]
    meg = ["convert-megatron", "-i", os.path.join(FIX, "convert", "meg_v3_tp1"), "-o", conv_out, "-q"]
    nemo = ["convert-nemo", "-i", os.path.join(FIX, "convert", "nemo_tp1_tgz", "model.nemo"), "-o", conv_out, "-q"]
    sq = ["smoothquant", "-i", BPE, "-o", conv_out, "-q", "--calib-data", txt]
    gemm = ["gemm-tune", "--head-num", "4", "--size-per-head", "16", "--inter-size", "64", "--vocab-size", "100",
            "--data-type", "fp32", "-o", out]
    gemm_req = ["--batch-size", "1", "--beam-width", "1", "--max-input-len", "8"]
    outs = [out, conv_out]
    T = []
    for base in (gen_n, chat):
        T += [
            (base, "--top-k", BAD_INT_NONNEG + ["1025"]),
            (base, "--top-p", BAD_REAL + ["-0.1", "1.5"]),
            (base, "--temperature", BAD_REAL + ["-1"]),
            (base, "--repetition-penalty", BAD_REAL + ["0", "-1"]),
            (base, "--presence-penalty", BAD_REAL),
            (base, "--frequency-penalty", BAD_REAL),
            (base, "--top-p-decay", BAD_REAL + ["0", "-0.5", "1.5"]),
            (base, "--top-p-min", BAD_REAL + ["0", "1.5"]),
            (base, "--top-p-reset-ids", ["-5", HUGE, OVER, "nan", "abc", "", "50257"]),
            (base, "--len-penalty", BAD_REAL),
            (base, "--beam-search-diversity-rate", BAD_REAL),
            (base, "--min-length", BAD_INT_NONNEG),
            (base, "--beam-width", BAD_INT_POS + ["65"]),
            (base, "--seed", ["-1", OVER, "nan", "abc", "", "1.5"]),
            (base, "--start-id", ["-5", HUGE, OVER, "nan", "abc", "", "50257"]),
            (base, "--end-id", ["-5", HUGE, OVER, "nan", "abc", ""]),
            (base, "--session-len", BAD_INT_NONNEG),
            (base, "--memory-len", BAD_INT_NONNEG),
            (base, "--threads", BAD_INT_NONNEG),
            (base, "--tensor-para-size", BAD_INT_NONNEG + ["2"]),
            (base, "--pipeline-para-size", BAD_INT_NONNEG + ["2"]),
            (base, "--int8-mode", ["-1", "3", "abc", "", "nan"]),
            (base, "--device", ["gpu", "", "CPU"]),
            (base, "--dtype", ["fp64", "", "int8"]),
            (base, "--tokenizer", [os.path.join(tmp, "nope")]),
            (base, "--gemm-config", [os.path.join(tmp, "nope")]),
        ]
    T += [
        (gen, "--max-new-tokens", BAD_INT_POS + ["16777217"]),
        (chat, "--max-new-tokens", BAD_INT_POS + ["16777217"]),
        (gen_n, "--batch-size", BAD_INT_POS + ["65537"]),
        (gen_n, "--max-seq-len", BAD_INT_NONNEG + ["16777217"]),
        (gen_n, "--batching", ["eager", ""]),
        (gen_n, "--prompt-table", [os.path.join(tmp, "nope.npy")]),
        (gen_n, "--task", ["squad"]),
        (["generate", "-m", BPE, "--output", out, "--max-new-tokens", "2"], "--prompts", [os.path.join(tmp, "nope")]),
        (["generate", "-m", BPE, "--output", out, "--max-new-tokens", "2"], "--input-ids", [os.path.join(tmp, "nope")]),
        (ev, "--batch-size", BAD_INT_POS + ["65537"]),
        (ev, "--max-examples", [v for v in BAD_INT_POS if v != HUGE]),  # a huge N is "all"
        (ev, "--threads", BAD_INT_NONNEG),
        (ev, "--tensor-para-size", BAD_INT_NONNEG + ["2"]),
        (ev, "--int8-mode", ["-1", "3", "abc"]),
        (ev, "--data", [os.path.join(tmp, "nope")]),
        (ev, "--device", ["gpu"]),
        (ev, "--dtype", ["fp64"]),
        (chat, "--input", [os.path.join(tmp, "nope")]),
    ]
    for base in (conv, meg, nemo):
        T += [
            (base, "-g", BAD_INT_POS + ["5000"]),
            (base, "-p", BAD_INT_POS + ["5000"]),
            (base, "-t", ["fp64", "int8", "", "abc"]),
            (base, "--start-id", ["-5", OVER, "nan", "abc", "", "4294967296"]),
            (base, "--end-id", ["-5", OVER, "nan", "abc", "", "4294967296"]),
            (base, "--vocab-path", [os.path.join(tmp, "nope")]),
        ]
    T += [
        (conv, "--smoothquant", BAD_REAL + ["-0.1", "1.5"]),
        (conv + ["--smoothquant", "0.5"], "--calib-samples", BAD_INT_POS + ["16777217"]),
        (conv + ["--smoothquant", "0.5"], "--calib-seq-len", BAD_INT_POS + ["16777217"]),
        (conv + ["--smoothquant", "0.5"], "--calib-data", [os.path.join(tmp, "nope")]),
        (conv, "--model", ["llama", ""]),
        (meg, "--head-num", ["-1", OVER, "nan", "abc", "", "3"]),
        (meg, "--trained-tensor-parallel-size", ["-1", OVER, "nan", "abc", ""]),
        (nemo, "--prompt-start-id", ["-5", OVER, "nan", "abc"]),
        (nemo, "--prompt-in-file", [os.path.join(tmp, "nope.nemo")]),
        (sq, "--alpha", BAD_REAL + ["-0.1", "1.5"]),
        (sq + ["--alpha", "0.5"], "-g", BAD_INT_POS + ["5000"]),
        (sq + ["--alpha", "0.5"], "-t", ["fp64", ""]),
        (sq + ["--alpha", "0.5"], "--calib-samples", BAD_INT_POS + ["16777217"]),
        (sq + ["--alpha", "0.5"], "--calib-seq-len", BAD_INT_POS + ["16777217"]),
        (sq + ["--alpha", "0.5"], "--threads", BAD_INT_NONNEG),
        (sq + ["--alpha", "0.5"], "--format", ["onnx", ""]),
        (sq + ["--alpha", "0.5"], "--act-ranges", [os.path.join(tmp, "nope.json")]),
        (gemm + gemm_req[2:], "--batch-size", BAD_INT_POS + ["65537"]),
        (gemm + gemm_req[:2] + gemm_req[4:], "--beam-width", BAD_INT_POS + ["65"]),
        (gemm + gemm_req[:4], "--max-input-len", BAD_INT_POS + ["16777217"]),
        (gemm + gemm_req, "--tensor-para-size", BAD_INT_NONNEG + ["3"]),
        (gemm + gemm_req, "--int8-mode", ["-1", "3", "abc"]),
        (gemm + gemm_req, "--repeats", BAD_INT_POS + ["10001"]),
        (gemm + gemm_req, "--num-layer", BAD_INT_NONNEG),
        (["gemm-tune", "--size-per-head", "16", "--inter-size", "64", "--vocab-size", "100", "--data-type", "fp32",
          "-o", out] + gemm_req, "--head-num", ["-1", HUGE, OVER, "nan", "abc", ""]),
        (["prompt-convert", "-i", os.path.join(tmp, "nope.nemo"), "--model-dir", BPE], "--start-id", ["-5", OVER, "abc"]),
        (["tokenize", "--input", txt, "--output", out], "--tokenizer", [os.path.join(tmp, "nope"), ""]),
        (["inspect"], "", [os.path.join(tmp, "nope"), ""]),
    ]
    return T, outs


def test_values(tmp):
    table, outs = flag_table(tmp)
    runs = 0
    for base, flag, values in table:
        for v in values:
            args = base + ([flag, v] if flag else [v])
            t0 = time.time()
            r = ftx(*args, input="", timeout=60)
            dt = time.time() - t0
            runs += 1
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            name = " ".join([base[0], flag, repr(v)])
            # A usage error names the flag (or its long name); a file error names the file.
            named = bool(lines) and ((flag and any(n in lines[0] for n in (flag, flag.lstrip("-")))) or (v and v in lines[0])
                                     or (v == "" and "an empty argument" in lines[0]))
            ok = r.returncode in (1, 2) and len(lines) == 1 and lines[0].startswith("ftx: error:") and named
            check(ok and dt < 20, f"{name}: exit {r.returncode}, {dt:.1f} s, stderr {lines!r}")
            for o in outs:
                if os.path.exists(o):
                    check(False, f"{name}: {o} was written")
                    shutil.rmtree(o) if os.path.isdir(o) else os.remove(o)
    print(f"flags: {runs} bad values over {len(table)} flags")
    # Leftovers of any kind (.tmp-PID, .partial) in the working folder.
    stray = [p for p in listing(tmp) if ".tmp-" in p or p.endswith(".partial") or p.endswith(".index")]
    check(not stray, f"left behind: {stray}")

    # Rules across flags (lib's request checks, so JSON lines get them too).
    csv = write(os.path.join(tmp, "q.csv"), "1,2\n")
    out = os.path.join(tmp, "r.jsonl")
    g = ["generate", "-m", BPE, "--input-ids", csv, "--output", out]
    for args, code, needles in [
        (["--max-new-tokens", HUGE], 2, ["--max-new-tokens 9223372036854775807 must be at most 16777216"]),
        (["--max-new-tokens", "4", "--min-length", "10"], 2, ["--min-length 10 is more than --max-new-tokens 4"]),
        (["--max-new-tokens", "4", "--beam-width", "4", "--top-k", "5"], 2,
         ["--top-k 5 has no effect with beam search (--beam-width 4)"]),
        (["--max-new-tokens", "4", "--beam-width", "4", "--top-p", "0.5"], 2, ["--top-p 0.5 has no effect with beam search"]),
        (["--max-new-tokens", "4", "--temperature", "0.9"], 2,
         ["--temperature 0.9 has no effect with greedy decoding (--top-k 0 and --top-p 0)"]),
        (["--max-new-tokens", "10000000"], 1, ["exceeds the model's max_pos_seq_len 512"]),
        (["--max-new-tokens", "4", "--top-p-decay", "0.5"], 2,
         ["--top-p-decay 0.5 has no effect outside top-p sampling (--top-k 0, --top-p > 0, --beam-width 1"]),
    ]:
        one_line_error(" ".join(args), ftx(*g, *args), code, *needles)
        check(not os.path.exists(out), f"{args}: output written")
    jl = write(os.path.join(tmp, "q.jsonl"), json.dumps({"ids": [1], "max_new_tokens": 3, "min_length": 5}) + "\n")
    one_line_error("JSON min_length > max_new_tokens",
                   ftx("generate", "-m", BPE, "--prompts", jl, "--max-new-tokens", "4", "--output", out), 1,
                   "line 1 (prompt 1): min_length 5 is more than max_new_tokens 3")
    # Temperature with top-k or top-p, or 0 (greedy) or 1 (the default), is fine.
    for args in (["--temperature", "0.9", "--top-k", "5"], ["--temperature", "0.9", "--top-p", "0.5"],
                 ["--temperature", "0"], ["--beam-width", "2"]):
        r = ftx(*g[:-1], "-", "--max-new-tokens", "2", "--quiet", *args)
        check(r.returncode == 0, f"{args}: {r.stderr!r}")
    one_line_error("eval-lambada --max-examples 0", ftx("eval-lambada", "-m", BPE, "--max-examples", "0"), 2,
                   "--max-examples 0 must be at least 1")


def test_generate(tmp):
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


def test_ft_spellings(tmp):
    # FT's converter flags, accepted: the same folder as ftx's own spelling.
    r = ftx("convert-hf", "-in_file", HF_BIN, "-saved_dir", os.path.join(tmp, "ft"), "-i_g", "2",
            "-weight_data_type", "fp16", "-t_g", "1", "-processes", "2", "-q")
    check(r.returncode == 0 and r.stderr.strip() == "ftx: note: -t_g ignored: ftx reads the HuggingFace weights whole; "
          "the training GPU count is not needed", f"FT's convert-hf flags: {r.returncode} {r.stderr!r}")
    r2 = ftx("convert-hf", "-i", HF_BIN, "-o", os.path.join(tmp, "ftx"), "-g", "2", "-t", "fp16", "-q")
    same = r.returncode == 0 and r2.returncode == 0 and all(
        open(os.path.join(tmp, "ft", "2-gpu", f), "rb").read() == open(os.path.join(tmp, "ftx", "2-gpu", f), "rb").read()
        for f in os.listdir(os.path.join(tmp, "ftx", "2-gpu")) if f.endswith(".bin"))
    check(same, "FT's spellings convert exactly what ftx's do")
    v0 = [os.path.join(FIX, "convert", "meg_v0_tp2_legacy", "release")]
    r = ftx("convert-megatron", "-i", v0[0],
            "-o", os.path.join(tmp, "meg"), "-h_n", "4", "-t_g", "2", "--infer_gpu_num", "1", "-cpu", "1", "-q")
    check(r.returncode == 0 and os.path.isdir(os.path.join(tmp, "meg", "1-gpu"))
          and "-cpu ignored: ftx always reads checkpoints on the CPU" in r.stderr, f"FT's megatron flags: {r.stderr!r}")
    # Everywhere else: "did you mean".
    csv = write(os.path.join(tmp, "p.csv"), "1\n")
    out = os.path.join(tmp, "o.jsonl")
    for args, needle in [
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--max-new-tokens", "2", "--top_k", "5"],
         "generate: --top_k is not an ftx flag; did you mean --top-k?"),
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--output_len", "2"],
         "generate: --output_len is not an ftx flag; did you mean --max-new-tokens?"),
        (["generate", "--ckpt_path", BPE, "--input-ids", csv, "--output", out, "--max-new-tokens", "2"],
         "generate: --ckpt_path is not an ftx flag; did you mean --model?"),
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--max-new-token", "2"],
         "did you mean --max-new-tokens?"),
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--max-new-tokens", "2", "--lib_path", "x.so"],
         "--lib_path is not an ftx flag; ftx needs no library path"),
        (["chat", "-m", BPE, "--sample_input_file", csv], "did you mean --input?"),
        (["eval-lambada", "-m", BPE, "--lambada_path", csv], "did you mean --data?"),
        (["convert-nemo", "-i", "x.nemo", "-o", os.path.join(tmp, "n"), "-p_o", "p"],
         "ftx writes the prompt tables into the model folder with --prompt-in-file"),
        (["convert", "-i", HF_BIN, "-o", os.path.join(tmp, "c")],
         "unknown subcommand 'convert'; did you mean 'convert-hf', 'convert-megatron', 'convert-mesh-jax' or "
         "'convert-nemo'?"),
        (["genrate", "-m", BPE], "unknown subcommand 'genrate'; did you mean 'generate'?"),
        (["gemm-tune", "8", "1", "32", "12", "128", "6144", "51200", "1", "1", "0"],
         "gemm-tune takes flags, not gpt_gemm's positional arguments; the same request is: ftx gemm-tune --batch-size 8 "
         "--beam-width 1 --max-input-len 32 --head-num 12 --size-per-head 128 --inter-size 6144 --vocab-size 51200 "
         "--data-type fp16 --tensor-para-size 1"),
    ]:
        one_line_error(" ".join(args[:1] + [a for a in args if a.startswith("-") and "_" in a]), ftx(*args), 2, needle)
    check(not os.path.exists(out) and not os.path.exists(os.path.join(tmp, "c")), "spelling errors wrote outputs")


def test_peer_spellings(tmp):
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
        (gen + ["--group_size", "64"], "did you mean --int4-group-size?"),
        (gen + ["--int4-group-size", "64"], "applies to --weight-only-precision int4 only"),
        (gen + ["--weight_only_precision", "int4", "--int8-mode", "1"], "both quantise the layer GEMMs"),
        (gen + ["--weight-only-precision", "int8", "--int8-mode", "2"], "is --int8-mode 1, not --int8-mode 2"),
        (["smoothquant", "-i", NEOX, "-o", os.path.join(tmp, "x"), "--use_fp8"], "did you mean --fp8?"),
        (["smoothquant", "-i", NEOX, "-o", os.path.join(tmp, "x"), "--fp8_kv_cache"], "did you mean --fp8?"),
        (["smoothquant", "-i", NEOX, "-o", os.path.join(tmp, "x"), "--qformat", "fp8"], "--fp8 (qformat fp8)"),
        (["convert-megatron", "-i", "x", "-o", os.path.join(tmp, "y"), "--pp_size", "2"], "ftx writes no pipeline split"),
        (["convert-hf", "-i", HF_BIN, "-o", os.path.join(tmp, "y"), "--use_weight_only"], "ftx generate --int8-mode 1, --weight-only-precision int4"),
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


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"values": test_values, "generate": test_generate, "ft_spellings": test_ft_spellings, "peer_spellings": test_peer_spellings}[what](tmp)
    finish(f"flags_test {what}")


if __name__ == "__main__":
    main()
