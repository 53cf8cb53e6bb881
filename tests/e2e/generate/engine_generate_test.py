#!/usr/bin/python3
"""End-to-end checks of `ftx generate` on the engine fixtures (scripts/fixtures/make_engine_models.py).

Usage: engine_generate_test.py {cli|tp|errors}
  cli:    greedy output_ids equal the float64 reference's greedy continuation for every fixture
          model; --batch-size 1 equals one batch; output fields (sequence_length, finish_reason,
          log probs, context embeddings, beams, text, stream lines, stop words); issue 49's
          context_log_probs against the decode steps' log probs (and past the prefix cache),
          --prompt, "id" and --echo-prompt; FT's per-request fields (is_return_context_embeddings,
          start_id, top_p_decay/top_p_min) and the three penalties together.
  tp:     `mpirun -np 2` on the 2-gpu folders gives the same output file as 1 rank on 1-gpu.
  errors: each bad input is exit code 1 with an `ftx: error:` line naming the problem (a usage
          error: exit code 2); issue 49's refusals (scoring a session, a non-scalar "id", ...).
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
    test_I49_context_log_probs_equal_the_decode_steps(tmp)
    test_I49_prompt_flag_id_and_echo(tmp)
    test_I49_context_embeddings_and_start_id_per_request(tmp)
    test_I49_factual_nucleus_and_penalties(tmp)


def jsonl_run(tmp, model_dir, requests, extra=(), name="req", mpi=0):
    """`ftx generate` of JSON-line requests; (results or None, the completed process)."""
    req, out = os.path.join(tmp, name + ".jsonl"), os.path.join(tmp, name + ".out.jsonl")
    with open(req, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in requests))
    args = ["-m", model_dir, "--output", out, "--force", "--quiet", *extra]
    if requests:
        args += ["--prompts", req]
    if "--max-new-tokens" not in extra:
        args += ["--max-new-tokens", "4"]
    r = run(args, mpi)
    return ([json.loads(l) for l in open(out)] if r.returncode == 0 else None), r


def test_I49_context_log_probs_equal_the_decode_steps(tmp):
    """context_log_probs of a prompt followed by its greedy continuation equal, at the continuation's
    positions, the full-softmax log probabilities the decode steps gave those tokens (top_p 1e-6 keeps
    the top token alone and reports its full-softmax log probability): the lm_head on every prompt
    position against the one on each step's last. A scored prompt takes nothing from the prefix
    cache: the same scores after an unscored request that cached its blocks (--tokens-per-block 2)."""
    worst, n = 0.0, 0
    for m in MODELS:
        exp = json.load(open(os.path.join(FIX, m, "expected.json")))
        folder = os.path.join(FIX, m, "1-gpu")
        greedy, _ = jsonl_run(tmp, folder, [{"ids": p, "top_p": 1e-6, "return_log_probs": True, "max_new_tokens": 6}
                                            for p in exp["prompts"]], name="greedy")
        if greedy is None:
            check(False, f"{m}: greedy run failed")
            continue
        seqs = [p + g["output_ids"] for p, g in zip(exp["prompts"], greedy)]
        scored, r = jsonl_run(tmp, folder, [{"ids": s} for s in seqs],
                              ["--max-new-tokens", "0", "--return-context-log-probs"], name="scored")
        if not check(scored is not None, f"{m}: scoring failed: {r.stderr.strip()}"):
            continue
        for p, g, s in zip(exp["prompts"], greedy, scored):
            check(s["output_ids"] == [] and s["finish_reason"] == "length", f"{m}: max_new_tokens 0 generated {s}")
            ctx = s["context_log_probs"]
            check(len(ctx) == s["input_length"] - 1, f"{m}: {len(ctx)} context_log_probs for {s['input_length']} tokens")
            tail = ctx[len(p) - 1:]
            for a, b in zip(tail, g["output_log_probs"]):
                worst = max(worst, abs(a - b))
                n += 1
            check(len(tail) == len(g["output_log_probs"]), f"{m}: {len(tail)} scores for {len(g['output_log_probs'])} steps")
        # The prefix cache holds the first request's blocks; the scored ones run every token anyway.
        again, r = jsonl_run(tmp, folder, [{"ids": seqs[0], "max_new_tokens": 1}] +
                             [{"ids": seqs[0], "return_context_log_probs": True, "max_new_tokens": 1}] * 2,
                             ["--tokens-per-block", "2", "--batch-size", "1"], name="again")
        if check(again is not None, f"{m}: prefix-cache run failed: {r.stderr.strip()}"):
            for a in again[1:]:
                d = max(abs(x - y) for x, y in zip(a["context_log_probs"], scored[0]["context_log_probs"]))
                check(d <= 1e-6, f"{m}: scores after the prefix cache held the prompt differ by {d:.2e}")
            check("context_log_probs" not in again[0], f"{m}: an unscored request has context_log_probs")
    check(worst <= 1e-5 and n >= 6 * len(MODELS), f"context_log_probs differ from the decode steps' log probs by "
          f"{worst:.2e} ({n} positions compared)")
    print(f"ok   I49 context_log_probs = the decode steps' log probs within {worst:.1e} at {n} positions of "
          f"{len(MODELS)} models")


def test_I49_prompt_flag_id_and_echo(tmp):
    """--prompt TEXT (repeatable) before the --prompts file's prompts; a request's "id" copied to its
    result; --echo-prompt's input_prompt, generated_text and generated_tokens (Megatron Core's)."""
    bpe = os.path.join(FIX, "gpt2_bpe", "1-gpu")
    reqs = [{"id": "a-1", "text": "The quick brown"}, {"id": 7, "ids": [464, 2068], "echo_prompt": False},
            {"id": None, "text": "Hello"}]
    res, r = jsonl_run(tmp, bpe, reqs, ["--prompt", "Hello world, this is", "--prompt", "One two", "--echo-prompt"],
                       name="echo")
    if not check(res is not None, f"--prompt with --prompts: {r.stderr.strip()}"):
        return
    check([x["index"] for x in res] == [0, 1, 2, 3, 4], f"indices {[x['index'] for x in res]}")
    check([x.get("id", "absent") for x in res] == ["absent", "absent", "a-1", 7, None], f"ids {[x.get('id') for x in res]}")
    check([x.get("input_prompt") for x in res] == ["Hello world, this is", "One two", "The quick brown", None, "Hello"],
          f"input_prompt {[x.get('input_prompt') for x in res]}")
    check(res[0]["input_length"] == 5, f"--prompt 'Hello world, this is' is 5 GPT-2 tokens, got {res[0]['input_length']}")
    for x in res:
        if "input_prompt" in x:
            check(x["generated_text"] == x["text"] and x["generated_tokens"] == x["output_ids"],
                  f"generated_text/tokens of {x['index']}: {x}")
        else:
            check("generated_text" not in x and "generated_tokens" not in x, f"echo_prompt false: {x}")
    # An ids prompt echoes its ids decoded; --prompt alone needs no file.
    alone, r = jsonl_run(tmp, bpe, [], ["--prompt", "Hello world, this is", "--echo-prompt"], name="alone")
    if check(alone is not None, f"--prompt alone: {r.stderr.strip()}"):
        check(len(alone) == 1 and alone[0]["input_prompt"] == "Hello world, this is", f"--prompt alone: {alone}")
    ids, r = jsonl_run(tmp, bpe, [{"ids": [15496, 995], "echo_prompt": True}], name="ids")
    if check(ids is not None, f"ids with echo_prompt: {r.stderr.strip()}"):
        check(ids[0]["input_prompt"] == "Hello world", f"ids [15496, 995] echo {ids[0]['input_prompt']!r}")


def test_I49_context_embeddings_and_start_id_per_request(tmp):
    """FT's per-request is_return_context_embeddings and start_id: a request's embedding equals the
    one --return-context-embeddings gives the same prompt for the whole run (also when an earlier
    request left the prompt's blocks in the prefix cache, which an embedded prompt does not take: it
    sums over every prompt token), and only the requests that ask carry one; an empty prompt starts
    from its request's start_id, which overrides --start-id."""
    m = os.path.join(FIX, "gpt2", "1-gpu")
    prompts = [[5, 17, 93, 4, 4, 250], [201, 3], [77, 78, 79, 80, 81]]
    whole, r = jsonl_run(tmp, m, [{"ids": p} for p in prompts], ["--return-context-embeddings"], name="ctxall")
    if not check(whole is not None, f"--return-context-embeddings: {r.stderr.strip()}"):
        return
    reqs = [{"ids": prompts[0]}, {"ids": prompts[0], "is_return_context_embeddings": True},
            {"ids": prompts[1], "is_return_context_embeddings": False},
            {"ids": prompts[2], "is_return_context_embeddings": True}]
    for extra in ([], ["--tokens-per-block", "2", "--batch-size", "1"]):
        per, r = jsonl_run(tmp, m, reqs, extra, name="ctxper")
        if not check(per is not None, f"is_return_context_embeddings {extra}: {r.stderr.strip()}"):
            continue
        check(["context_embedding" in x for x in per] == [False, True, False, True],
              f"{extra}: context_embedding only where asked: {['context_embedding' in x for x in per]}")
        for got, want in ((per[1], whole[0]), (per[3], whole[2])):
            d = max(abs(a - b) for a, b in zip(got["context_embedding"], want["context_embedding"]))
            check(len(got["context_embedding"]) == 64 and d <= 1e-5,
                  f"{extra}: a request's context_embedding differs from the run-wide flag's by {d:.2e}")
        check([x["output_ids"] for x in per] == [whole[0]["output_ids"], whole[0]["output_ids"], whole[1]["output_ids"],
                                                  whole[2]["output_ids"]], f"{extra}: tokens changed with embeddings")
    # The flag is every request's default; a request's false turns it off.
    off, r = jsonl_run(tmp, m, [{"ids": prompts[1], "is_return_context_embeddings": False}, {"ids": prompts[1]}],
                       ["--return-context-embeddings"], name="ctxoff")
    if check(off is not None, f"is_return_context_embeddings false: {r.stderr.strip()}"):
        check(["context_embedding" in x for x in off] == [False, True], "a request's false overrides the flag")
    # start_id: FT starts a request without input from it.
    ref, r = jsonl_run(tmp, m, [{"ids": [42]}, {"ids": [7]}], name="startref")
    got, r2 = jsonl_run(tmp, m, [{"ids": [], "start_id": 42}, {"ids": []}, {"ids": [9, 8], "start_id": 42}],
                        ["--start-id", "7"], name="startid")
    if check(ref is not None and got is not None, f"start_id: {r.stderr.strip()} {r2.stderr.strip()}"):
        check(got[0]["input_length"] == 1 and got[0]["output_ids"] == ref[0]["output_ids"],
              f"an empty prompt with start_id 42 is prompt [42]: {got[0]} vs {ref[0]}")
        check(got[1]["output_ids"] == ref[1]["output_ids"], "an empty prompt without start_id takes --start-id 7")
        check(got[2]["input_length"] == 2, "start_id leaves a non-empty prompt as it is")
    print("ok   I49 is_return_context_embeddings and start_id per request")


def test_I49_factual_nucleus_and_penalties(tmp):
    """top_p_decay 1 is plain top-p (FT's default), whatever top_p_min; a decay changes the draws; a
    reset id drawn at every step keeps p at top_p; the three penalties run together and change the
    tokens; the same fields as flags give the same tokens."""
    m = os.path.join(FIX, "gpt2", "1-gpu")
    prompts = [[5, 17, 93], [201, 3, 3, 3], [77, 78]]
    base = [{"ids": p, "top_p": 0.95, "seed": 100 + s, "max_new_tokens": 12} for s in range(8) for p in prompts]
    plain, r = jsonl_run(tmp, m, base, name="plainp")
    if not check(plain is not None, f"plain top-p: {r.stderr.strip()}"):
        return
    one, _ = jsonl_run(tmp, m, [dict(q, top_p_decay=1.0, top_p_min=0.5) for q in base], name="decay1")
    decayed, _ = jsonl_run(tmp, m, [dict(q, top_p_decay=0.3, top_p_min=0.01) for q in base], name="decay03")
    flags, r = jsonl_run(tmp, m, [{k: v for k, v in q.items() if k != "top_p"} for q in base],
                         ["--top-p", "0.95", "--top-p-decay", "0.3", "--top-p-min", "0.01"], name="decayflag")
    if check(None not in (one, decayed, flags), f"decay runs: {r.stderr.strip()}"):
        ids = lambda res: [x["output_ids"] for x in res]  # noqa: E731
        check(ids(one) == ids(plain), "top_p_decay 1 differs from plain top-p")
        changed = sum(a != b for a, b in zip(ids(decayed), ids(plain)))
        check(changed >= len(base) // 2, f"top_p_decay 0.3 changed only {changed} of {len(base)} requests")
        check(ids(flags) == ids(decayed), "--top-p-decay/--top-p-min differ from the request fields")
        # With p at 0.01 the draw is the most likely token: the decayed tail of each request is greedy.
        long = [(q, x) for q, x in zip(base, decayed) if len(x["output_ids"]) > 4]
        greedy, _ = jsonl_run(tmp, m, [{"ids": q["ids"] + x["output_ids"][:4], "max_new_tokens": 1} for q, x in long],
                              name="greedytail")
        if check(greedy is not None and len(long) >= len(base) // 2, f"{len(long)} decayed requests ran 5 steps"):
            check(all(x["output_ids"][4] == g["output_ids"][0] for (_, x), g in zip(long, greedy)),
                  "after 4 decays (p = 0.01) the draw is not the top token")
    # A penalty run: the three together, against each alone and none.
    pen = [{"ids": p, "max_new_tokens": 16} for p in prompts]
    none, _ = jsonl_run(tmp, m, pen, name="pen0")
    allp, r = jsonl_run(tmp, m, [dict(q, repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.7)
                                 for q in pen], name="pen3")
    flags, _ = jsonl_run(tmp, m, pen, ["--repetition-penalty", "1.3", "--presence-penalty", "0.5",
                                       "--frequency-penalty", "0.7"], name="pen3flags")
    if check(None not in (none, allp, flags), f"three penalties: {r.stderr.strip()}"):
        check([x["output_ids"] for x in allp] != [x["output_ids"] for x in none], "the penalties changed nothing")
        check([x["output_ids"] for x in allp] == [x["output_ids"] for x in flags], "penalty flags differ from fields")
    print("ok   I49 top_p_decay/top_p_min and the three penalties, per request and as flags")


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
    test_I49_refusals(tmp, m, csv, expect_error, base)


def test_I49_refusals(tmp, m, csv, expect_error, base):
    """Prompt scoring with a session, an "id" that is no scalar, --max-new-tokens 0 without scoring,
    --prompt and --echo-prompt without a tokenizer, --prompts with --input-ids: each named."""
    out = base[-1]
    jl = csv("sess.jsonl", json.dumps({"ids": [1, 2, 3], "session": "s", "return_context_log_probs": True}) + "\n")
    expect_error("scoring a session round", ["-m", m, "--prompts", jl, *base],
                 'sess.jsonl: line 1 (prompt 1): "return_context_log_probs" cannot be combined with a "session"')
    jl = csv("idobj.jsonl", json.dumps({"ids": [1, 2], "id": {"a": 1}}) + "\n")
    expect_error("an object id", ["-m", m, "--prompts", jl, *base],
                 'idobj.jsonl: line 1 (prompt 1): "id" must be a string, a number, a boolean or null, not {"a":1}')
    for args, needle in (
            (["--input-ids", csv("ok.csv", "1,2\n"), "--max-new-tokens", "0", "--output", out],
             "--max-new-tokens 0 generates nothing (ftx generate allows it with --return-context-log-probs"),
            (["--prompt", "Hello", *base], "--prompt TEXT needs a tokenizer"),
            (["--input-ids", csv("ok.csv", "1,2\n"), "--echo-prompt", *base], "--echo-prompt needs a tokenizer"),
            (["--input-ids", csv("ok.csv", "1,2\n"), "--prompts", csv("p.txt", "x\n"), *base],
             "give one of --input-ids FILE.csv and --prompts FILE, not both"),
            (base, "give --prompt TEXT, --prompts FILE or --input-ids FILE.csv")):
        r = run(["-m", m, *args])
        check(r.returncode == 2 and needle in r.stderr, f"{args}: exit {r.returncode}, {r.stderr.strip()!r}")
    check(not os.path.exists(out), "no output file is left behind by a refused run")
    # FT's request fields: each bad value named with its line and key.
    for obj, needle in (({"ids": [1], "top_p": 0.9, "top_p_decay": 0}, "top_p_decay 0 outside (0, 1]"),
                        ({"ids": [1], "top_p": 0.9, "top_p_min": 1.5}, "top_p_min 1.5 outside (0, 1]"),
                        ({"ids": [1], "top_p": 0.9, "top_p_reset_ids": 301},
                         "top_p_reset_ids 301 outside the vocabulary [0, 301)"),
                        ({"ids": [1], "top_k": 4, "top_p_decay": 0.5}, "top_p_decay 0.5 has no effect outside top-p"),
                        ({"ids": [], "start_id": 301}, '"start_id" 301 is outside the vocabulary [0, 301)'),
                        ({"ids": [], "start_id": "x"}, '"start_id" must be an integer, not "x"'),
                        ({"ids": [1], "frequency_penalty": "high"}, '"frequency_penalty" must be a number, not "high"'),
                        ({"ids": [1], "is_return_context_embeddings": 1},
                         '"is_return_context_embeddings" must be true or false, not 1')):
        jl = csv("ft.jsonl", json.dumps({"ids": [2]}) + "\n" + json.dumps(obj) + "\n")
        expect_error(f"request {obj}", ["-m", m, "--prompts", jl, *base], "ft.jsonl: line 2 (prompt 2): " + needle)
    check(not os.path.exists(out), "no output file is left behind by a refused request")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"cli": test_cli, "tp": test_tp, "errors": test_errors}[what](tmp)
    finish(f"engine_generate_test {what}")


if __name__ == "__main__":
    main()
