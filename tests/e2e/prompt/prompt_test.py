#!/usr/bin/python3
"""End-to-end checks of prompt learning (issue 13) against tests/reference/prompt_reference.py and the
float64 generation references of scripts/fixtures/make_prompt_fixtures.py.

Usage: prompt_test.py {convert|generate|errors|soft|soft_errors}
  convert:  `ftx prompt-convert -o x.npy` is byte-identical to np.save of the reference table for the
            classic archive (tar, fp32), the tar.gz with fp16 weights under mp_rank_00/, the extracted
            bf16 folder and the PEFT archive; --model-dir writes the reference's table bytes in the
            folder's dtype (fp16 gpt2, bf16 megatron, fp32 gptnext), config.ini's prompt keys and
            [task_K] sections, and manifest.json entries whose sizes and CRC-32 match the files;
            --json summary; convert-nemo --prompt-in-file writes the model and the tables at once.
  generate: `ftx generate` with the tables: greedy tokens equal the reference for a mixed batch
            (three tasks, no task; explicit virtual ids and "virtual_tokens"), at --batch-size 1, on
            `mpirun -np 2` with the 2-gpu folder, with --prompt-table x.npy (TRT-LLM's form), and
            start_ids CSV with --task; prefix prompts (type 2) the same at TP 1 and 2 (and with --int8-kv-cache), and a session
            whose second round continues a prefixed first; eval-lambada --task runs and differs
            from no task.
  errors:   truncated archive, config without task_templates and peft, tables of the wrong hidden
            size, an existing folder's tasks without --force, an unknown task, a virtual id beyond
            its table, a virtual id without a task: exit 1 with one `ftx: error:` line, and
            --model-dir left byte-for-byte as it was.
  soft:     FT's soft prompts (request_prompt_type 1, issue 49): greedy tokens of requests whose
            request_prompt_embedding rows R (inline, as a float16 .npy, cut by request_prompt_lengths)
            equal tests/reference/gpt_reference.py's float64 forward over [R; wte(ids)] (R at
            positions 0..P-1, position terms added) for gpt2 and gptnext, in a batch beside a request
            without one, at --batch-size 1, TP 2, PP 2, under a KV-cache budget that preempts (the
            rows embedded again when a request resumes), and --dtype fp16/bf16 (half_reference.py's
            emulation, R rounded as the embedding table is); input_length and sequence_length leave
            the rows out (FT's response_input_lengths); the .npy and the inline form of the same rows
            give the same tokens; rows equal to a task's prompt table give the task's tokens.
  soft_errors: refusals naming the field: rows of another width (inline and .npy, with the shape),
            a .npy of another dtype or missing, request_prompt_type 7, 2 (prefix) and 3 (p-tuning),
            type 1 without rows, rows without type 1, rows with type 0, a length outside the rows, and
            a soft prompt with a session, with return_context_log_probs, with a task.
Environment: FTX_BIN, FTX_FIXTURES.
"""
import configparser
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import zlib

import numpy as np
import torch

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(E2E, "..", "reference"))
sys.path.insert(0, E2E)  # e2e_util
sys.path.insert(0, os.path.join(E2E, "..", "..", "scripts", "fixtures"))  # the engine fixtures' weights
import gpt_reference  # noqa: E402
import half_reference  # noqa: E402
import make_engine_models as eng  # noqa: E402
import prompt_reference as ref  # noqa: E402
from e2e_util import check, finish, run_ftx  # noqa: E402

FIX = os.environ["FTX_FIXTURES"]
PF = os.path.join(FIX, "prompt")
ENG = os.path.join(FIX, "engine")


def ftx(*args, mpi=0, stdin=None):
    return run_ftx(list(args), mpi=mpi, stdin=stdin)


def ok(r, what):
    check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr.strip()}")
    return r.returncode == 0


def copy_model(tmp, name, tp=1):
    dst = os.path.join(tmp, f"{name}-{tp}")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(os.path.join(ENG, name, f"{tp}-gpu"), dst)
    return dst


def folder_digest(d):
    h = {}
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as f:
            h[n] = hashlib.sha256(f.read()).hexdigest()
    return h


def check_ft_folder(d, archive, dtype, what):
    files, ini = ref.ft_files(archive, dtype)
    for name, raw in files.items():
        p = os.path.join(d, name)
        check(os.path.exists(p) and open(p, "rb").read() == raw, f"{what}: {name} differs from the reference")
    cp = configparser.ConfigParser()
    cp.read(os.path.join(d, "config.ini"))
    check(cp.get("gpt", "num_tasks") == str(len(files)), f"{what}: num_tasks")
    check(cp.get("gpt", "prompt_learning_type") == "3", f"{what}: prompt_learning_type")
    check(cp.get("gpt", "prompt_learning_start_id") == str(int(cp.get("gpt", "end_id")) + 1),
          f"{what}: prompt_learning_start_id defaults to end_id + 1")
    for sec, key, val in ini:
        check(cp.has_option(sec, key) and cp.get(sec, key) == val, f"{what}: [{sec}] {key} = {val}")
    man = os.path.join(d, "manifest.json")
    if os.path.exists(man):
        entries = {e["file"]: e for e in json.load(open(man))["files"]}
        for name, raw in files.items():
            e = entries.get(name)
            check(e is not None and e["bytes"] == len(raw) and e["crc32"] == zlib.crc32(raw),
                  f"{what}: manifest.json entry of {name}")


def test_convert(tmp):
    for archive in ("classic.nemo", "classic_fp16.nemo", "classic_bf16", "peft.nemo"):
        out = os.path.join(tmp, archive.replace(".", "_") + ".npy")
        r = ftx("prompt-convert", "-i", os.path.join(PF, archive), "-o", out, "-q")
        if not ok(r, f"prompt-convert {archive}"):
            continue
        buf = io.BytesIO()
        np.save(buf, ref.npy_table(os.path.join(PF, archive)))
        check(open(out, "rb").read() == buf.getvalue(), f"{archive}: .npy differs from np.save of the reference")
    a = ref.npy_table(os.path.join(PF, "classic.nemo"))
    check(a.shape == (3, 5, 64) and not a[2, 2:].any(), "classic: 3 tasks (boolq skipped), arith zero-padded")

    # Summary, human and JSON.
    js = os.path.join(tmp, "sum.json")
    r = ftx("prompt-convert", "-i", os.path.join(PF, "classic.nemo"), "-o", os.path.join(tmp, "s.npy"), "--json", js)
    if ok(r, "prompt-convert --json"):
        j = json.load(open(js))
        check([(t["id"], t["name"], t["virtual_tokens"]) for t in j["tasks"]] ==
              [(0, "squad", 3), (1, "sentiment", 5), (2, "arith", 2)] and j["skipped"] == ["boolq"],
              f"--json summary: {j}")
        check("squad" in r.stderr and "boolq" in r.stderr, "task summary on stderr")

    # --model-dir in the folder's dtype: fp16 (gpt2), bf16 (megatron), fp32 (gptnext).
    for model, dtype, archive in (("gpt2", "fp16", "classic.nemo"), ("megatron", "bf16", "classic_fp16.nemo"),
                                  ("gptnext", "fp32", "classic_bf16")):
        d = copy_model(tmp, model)
        r = ftx("prompt-convert", "-i", os.path.join(PF, archive), "--model-dir", d, "-q")
        if ok(r, f"--model-dir {model}"):
            check_ft_folder(d, os.path.join(PF, archive), dtype, f"{model} <- {archive}")
        # --force replaces the tasks: with the PEFT table, only its task remains.
        r = ftx("prompt-convert", "-i", os.path.join(PF, "peft.nemo"), "--model-dir", d, "-q", "--force")
        if ok(r, f"--model-dir {model} --force"):
            check_ft_folder(d, os.path.join(PF, "peft.nemo"), dtype, f"{model} <- peft.nemo")
            check(not [n for n in os.listdir(d) if n.startswith("model.prompt_table.squad")],
                  f"{model}: --force removed the old tables")

    # convert-nemo --prompt-in-file: the converter fixture (hidden 32) with 32-wide tables.
    nemo_src = os.path.join(FIX, "convert", "nemo_tp1_tgz", "model.nemo")
    out = os.path.join(tmp, "conv")
    r = ftx("convert-nemo", "-i", nemo_src, "-o", out, "-t", "fp16", "-q",
            "--prompt-in-file", os.path.join(PF, "wrong_hidden.nemo"))
    if ok(r, "convert-nemo --prompt-in-file"):
        check_ft_folder(os.path.join(out, "1-gpu"), os.path.join(PF, "wrong_hidden.nemo"), "fp16", "convert-nemo -p_i")
        r = ftx("generate", "-m", os.path.join(out, "1-gpu"), "--input-ids", "-", "--task", "sentiment",
                "--max-new-tokens", "2", "--output", "-", "--quiet", stdin="1,2,3\n")
        ok(r, "generate on the convert-nemo --prompt-in-file folder")


def greedy(tmp, model_dir, requests, extra=(), mpi=0):
    p = os.path.join(tmp, "req.jsonl")
    with open(p, "w") as f:
        for r in requests:
            f.write(json.dumps(r) + "\n")
    r = ftx("generate", "-m", model_dir, "--prompts", p, "--max-new-tokens", "6", "--output", "-", "--quiet",
            *extra, mpi=mpi)
    if not ok(r, f"generate {model_dir} {extra}"):
        return None
    return [json.loads(l)["output_ids"] for l in r.stdout.splitlines()]


def json_requests(exp, names, V):
    """The fixture's requests as JSON lines: request 1 asks for its virtual tokens with "virtual_tokens"."""
    out = []
    for r in exp["requests"]:
        j = {"ids": r["real_ids"] if r["virtual_tokens"] else r["ids"]}
        if r["task"] is not None:
            j["task"] = names[r["task"]] if r["task"] % 2 == 0 else r["task"]  # names and ids both
        if r["virtual_tokens"]:
            j["virtual_tokens"] = r["virtual_tokens"]
        out.append(j)
    return out


def test_generate(tmp):
    exp_all = json.load(open(os.path.join(PF, "generate.json")))
    names = ["squad", "sentiment", "arith"]
    for model in ("gpt2", "gptnext"):
        exp = exp_all[model]
        reqs = json_requests(exp, names, exp["vocab_size"])
        d1, d2 = copy_model(tmp, model, 1), copy_model(tmp, model, 2)
        for d in (d1, d2):
            ok(ftx("prompt-convert", "-i", os.path.join(PF, "classic.nemo"), "--model-dir", d, "-q"), f"tables {d}")
        got = greedy(tmp, d1, reqs)
        check(got == exp["greedy"], f"{model}: mixed batch {got} != reference {exp['greedy']}")
        got = greedy(tmp, d1, reqs, ["--batch-size", "1"])
        check(got == exp["greedy"], f"{model}: --batch-size 1 {got}")
        got = greedy(tmp, d2, reqs, mpi=2)
        check(got == exp["greedy"], f"{model}: mpirun -np 2 {got}")
        # start_ids CSV and --task: request 0's explicit ids.
        r = ftx("generate", "-m", d1, "--input-ids", "-", "--task", "squad", "--max-new-tokens", "6", "--output", "-",
                "--quiet", stdin=",".join(map(str, exp["requests"][0]["ids"])) + "\n")
        if ok(r, f"{model}: --input-ids with --task"):
            check(json.loads(r.stdout)["output_ids"] == exp["greedy"][0], f"{model}: CSV + --task")
    # TensorRT-LLM's .npy (fp32, so the fp32 model's reference holds): tasks by index.
    exp = exp_all["gptnext"]
    npy = os.path.join(tmp, "table.npy")
    ok(ftx("prompt-convert", "-i", os.path.join(PF, "classic.nemo"), "-o", npy, "-q"), "npy")
    reqs = json_requests(exp, ["0", "1", "2"], exp["vocab_size"])
    for r in reqs:
        if "task" in r:
            r["task"] = str(r["task"])
    got = greedy(tmp, os.path.join(ENG, "gptnext", "1-gpu"), reqs, ["--prompt-table", npy])
    check(got == exp["greedy"], f"gptnext --prompt-table: {got}")

    # Prefix prompts (prompt_learning_type 2): the fixture's prefix folders.
    for model in ("gpt2", "gptnext"):
        exp = json.load(open(os.path.join(PF, "prefix", model, "expected.json")))
        reqs = [dict({"ids": r["ids"]}, **({"task": ["summ", 1][r["task"]]} if r["task"] is not None else {}))
                for r in exp["requests"]]
        for tp, extra in ((1, ()), (1, ("--batch-size", "1")), (2, ())):
            got = greedy(tmp, os.path.join(PF, "prefix", model, f"{tp}-gpu"), reqs, extra, mpi=2 if tp == 2 else 0)
            check(got == exp["greedy"], f"{model} prefix tp{tp} {extra}: {got} != reference {exp['greedy']}")
        # With an INT8 KV cache (the prefix K/V stored in it too): the emulation's greedy tokens.
        for tp in (1, 2):
            got = greedy(tmp, os.path.join(PF, "prefix", model, f"{tp}-gpu"), reqs, ["--int8-kv-cache"],
                         mpi=2 if tp == 2 else 0)
            want = exp["int8_kv_cache"]["greedy"]
            check(got == want, f"{model} prefix --int8-kv-cache tp{tp}: {got} != emulation {want}")
        # A session with a prefix: the second round continues the first (its context holds the prefix).
        r0, r1 = exp["requests"][0]["ids"][:2], exp["requests"][0]["ids"][2:]
        sess = [{"ids": r0, "task": "summ", "session": "s", "max_new_tokens": 1},
                {"ids": r1, "task": None, "session": "s"}]
        p = os.path.join(tmp, "sess.jsonl")
        with open(p, "w") as f:
            f.write("\n".join(json.dumps(x) for x in sess) + "\n")
        r = ftx("generate", "-m", os.path.join(PF, "prefix", model, "1-gpu"), "--prompts", p, "--max-new-tokens", "6",
                "--output", "-", "--quiet")
        if ok(r, f"{model}: prefix session"):
            lines = [json.loads(l) for l in r.stdout.splitlines()]
            # Round 2 sees prefix + r0 + round 1's token + r1: compare with one request of that context.
            one = greedy(tmp, os.path.join(PF, "prefix", model, "1-gpu"),
                         [{"ids": r0 + lines[0]["output_ids"] + r1, "task": "summ"}])
            check(one is not None and lines[1]["output_ids"] == one[0], f"{model}: prefix session round 2 {lines}")

    # eval-lambada --task on the GPT-2-vocabulary fixture (hidden 32): runs, and the virtual tokens
    # change the predictions' log-likelihood.
    d = copy_model(tmp, "gpt2_bpe")
    ok(ftx("prompt-convert", "-i", os.path.join(PF, "wrong_hidden.nemo"), "--model-dir", d, "-q"), "tables gpt2_bpe")
    outs = []
    for extra in ((), ("--task", "sentiment")):
        sj = os.path.join(tmp, "lam.json")
        r = ftx("eval-lambada", "-m", d, "--max-examples", "4", "--quiet", "--summary-json", sj, "--force", *extra)
        if ok(r, f"eval-lambada {extra}"):
            outs.append(json.load(open(sj))["mean_word_logprob"])
    check(len(outs) == 2 and outs[0] != outs[1], f"eval-lambada --task changes the log-likelihood: {outs}")


def error(args, want, what, stdin=None):
    r = ftx(*args, stdin=stdin)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) == 1 and lines[0].startswith("ftx: error:") and want in lines[0],
          f"{what}: exit {r.returncode}, stderr {r.stderr.strip()!r} (want one error line with {want!r})")


def test_errors(tmp):
    d = copy_model(tmp, "gpt2")
    before = folder_digest(d)
    for archive, want in (("truncated.nemo", "truncated"), ("no_templates.nemo", "neither task_templates nor peft"),
                          ("wrong_hidden.nemo", "hidden size 32")):
        error(["prompt-convert", "-i", os.path.join(PF, archive), "--model-dir", d], want, archive)
        check(folder_digest(d) == before, f"{archive}: --model-dir changed")
        check(not [n for n in os.listdir(tmp) if n.startswith(".gpt2-1")], f"{archive}: temporary folder left")
    error(["prompt-convert", "-i", os.path.join(PF, "wrong_hidden.nemo"), "--model-dir", d], "64", "hidden: both sizes")
    ok(ftx("prompt-convert", "-i", os.path.join(PF, "classic.nemo"), "--model-dir", d, "-q"), "tables")
    with_tables = folder_digest(d)
    error(["prompt-convert", "-i", os.path.join(PF, "peft.nemo"), "--model-dir", d], "--force", "tasks without --force")
    check(folder_digest(d) == with_tables, "refused --model-dir changed")
    V = 301
    for req, want, what in (({"ids": [1, 2], "task": "nosuch"}, "unknown task 'nosuch'", "unknown task"),
                            ({"ids": [V + 3, 2], "task": "squad"}, "which has 3 rows", "virtual id beyond the table"),
                            ({"ids": [V, 2]}, "names no task", "virtual id without a task"),
                            ({"ids": [2], "task": "arith", "virtual_tokens": 3}, "virtual_tokens", "too many")):
        error(["generate", "-m", d, "--prompts", "-", "--max-new-tokens", "2", "--output", "-"], want, what,
              stdin=json.dumps(req) + "\n")
        check("line 1" in ftx("generate", "-m", d, "--prompts", "-", "--max-new-tokens", "2", "--output", "-",
                              stdin=json.dumps(req) + "\n").stderr, f"{what}: names the request")
    r = ftx("generate", "-m", d, "--input-ids", "-", "--task", "nosuch", "--max-new-tokens", "2", "--output", "-",
            stdin="1\n")
    check(r.returncode == 2 and "unknown task 'nosuch'" in r.stderr, f"--task nosuch: {r.stderr.strip()}")
    r = ftx("generate", "-m", os.path.join(ENG, "gpt2", "1-gpu"), "--input-ids", "-", "--task", "squad",
            "--max-new-tokens", "2", "--output", "-", stdin="1\n")
    check(r.returncode == 2 and "no prompt tasks" in r.stderr, f"--task without tables: {r.stderr.strip()}")
    # Prefix prompts take no virtual ids, and no circular cache.
    pd = os.path.join(PF, "prefix", "gpt2", "1-gpu")
    error(["generate", "-m", pd, "--prompts", "-", "--max-new-tokens", "2", "--output", "-"], "prefix prompts",
          "virtual id with prefix prompts", stdin=json.dumps({"ids": [V, 2], "task": "summ"}) + "\n")
    error(["generate", "-m", pd, "--prompts", "-", "--max-new-tokens", "2", "--output", "-", "--memory-len", "8"],
          "--memory-len", "prefix with --memory-len", stdin=json.dumps({"ids": [1, 2], "task": "summ"}) + "\n")
    # A table of the wrong hidden size given with --prompt-table.
    npy = os.path.join(tmp, "h32.npy")
    ok(ftx("prompt-convert", "-i", os.path.join(PF, "wrong_hidden.nemo"), "-o", npy, "-q"), "h32 npy")
    error(["generate", "-m", os.path.join(ENG, "gpt2", "1-gpu"), "--input-ids", "-", "--prompt-table", npy,
           "--max-new-tokens", "2", "--output", "-"], "hidden size 32 differs from the model's 64", "npy hidden",
          stdin="1\n")


SOFT_NEW = 6


def soft_rows(seed, n):
    """n float32 rows of the fixtures' hidden size 64."""
    return (torch.randn(n, 64, generator=torch.Generator().manual_seed(seed), dtype=torch.float32) * 0.3).numpy()


def soft_reference(model, ids, rows, dtype="fp32", tokens=None):
    """gpt_reference's greedy tokens over [rows; wte(ids)] for an engine fixture model (its weights as
    make_engine_models.py writes them); with `tokens`, their log probabilities one by one after
    [rows; wte(ids)] and the tokens before them. A half dtype: half_reference.py's emulation, rows
    rounded."""
    m = eng.MODELS[model]
    W = eng.make_weights(m, torch.Generator().manual_seed(1234 + list(eng.MODELS).index(model)))
    cfg = eng.ref_cfg(m)
    R = torch.tensor(np.asarray(rows, dtype=np.float32), dtype=torch.float64)
    if dtype != "fp32":
        W, cfg, R = half_reference.half_weights(W, dtype), half_reference.half_cfg(cfg, dtype), \
            half_reference.rounded(R, dtype)
    embeds = {t: R[t] for t in range(len(R))}
    seq = [0] * len(R) + list(ids)
    if tokens is not None:
        lg = torch.log_softmax(gpt_reference.forward(cfg, W, seq + tokens[:-1], embeds=embeds), -1)
        return [float(lg[len(seq) - 1 + i][t]) for i, t in enumerate(tokens)]
    return gpt_reference.greedy(cfg, W, seq, SOFT_NEW, m["vocab"] - 1, embeds=embeds)[0]


def soft_run(tmp, model_dir, requests, extra=(), mpi=0):
    """The results; a run under a KV-cache budget (--kv-cache-memory) must also have preempted a
    request (its summary line counts them), so that its rows are seen again when it resumes."""
    p = os.path.join(tmp, "soft.jsonl")
    with open(p, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in requests))
    budget = "--kv-cache-memory" in extra
    r = ftx("generate", "-m", model_dir, "--prompts", p, "--max-new-tokens", str(SOFT_NEW), "--output", "-",
            *(() if budget else ("--quiet",)), *extra, mpi=mpi)
    if not ok(r, f"generate {model_dir} {extra}"):
        return None
    if budget:
        m = re.search(r"(\d+) preemptions", r.stderr)
        check(m is not None and int(m.group(1)) > 0, f"{model_dir} {extra}: no preemption: {r.stderr.strip()}")
    return [json.loads(l) for l in r.stdout.splitlines()]


def test_I49_soft_prompt_equals_the_reference_over_its_rows(tmp):
    for model in ("gpt2", "gptnext"):
        ra, rb, rc = soft_rows(7, 3), soft_rows(8, 5), soft_rows(9, 6)
        npy16 = os.path.join(tmp, f"{model}_b.npy")
        np.save(npy16, rb.astype(np.float16))
        npy32 = os.path.join(tmp, f"{model}_a.npy")
        np.save(npy32, ra)
        one = {"request_prompt_type": 1}
        reqs = [dict(one, ids=[5, 17, 42, 8], request_prompt_embedding=ra.tolist()),
                dict(one, ids=[19, 4, 77], request_prompt_embedding=npy16),
                {"ids": [3, 9, 14]},
                dict(one, ids=[11, 23], request_prompt_embedding=rc.tolist(), request_prompt_lengths=4),
                dict(one, ids=[5, 17, 42, 8], request_prompt_embedding=npy32)]
        rows = [ra, rb.astype(np.float16).astype(np.float32), np.zeros((0, 64), np.float32), rc[:4], ra]
        # The same requests sampled from the whole distribution (top_p 1): their output_log_probs tell
        # the rows apart where a tiny model's greedy tokens do not.
        n = len(reqs)
        reqs += [dict(r, top_k=0, top_p=1.0, seed=11, return_log_probs=True) for r in reqs]
        runs = [("fp32", os.path.join(ENG, model, "1-gpu"), (), 0),
                ("fp32", os.path.join(ENG, model, "1-gpu"), ("--batch-size", "1"), 0),
                ("fp32", os.path.join(ENG, model, "2-gpu"), (), 2),
                ("fp32", os.path.join(ENG, model, "1-gpu"), ("--pipeline-para-size", "2"), 2),
                ("fp32", os.path.join(ENG, model, "1-gpu"), ("--kv-cache-memory", "24K", "--tokens-per-block", "2"), 0),
                ("fp16", os.path.join(ENG, model, "1-gpu"), ("--dtype", "fp16"), 0),
                ("bf16", os.path.join(ENG, model, "1-gpu"), ("--dtype", "bf16"), 0)]
        want = {}
        for dtype, d, extra, mpi in runs:
            if dtype not in want:
                want[dtype] = [soft_reference(model, r["ids"], rw, dtype) for r, rw in zip(reqs[:n], rows)]
            got = soft_run(tmp, d, reqs, extra, mpi)
            if got is None:
                continue
            what = f"{model} {dtype} {d} {extra}"
            check([g["output_ids"] for g in got[:n]] == want[dtype],
                  f"{what}: {[g['output_ids'] for g in got[:n]]} != reference {want[dtype]}")
            # Half weights: the emulation's sums round activations where fp32 ones may fall on the
            # other side of a half boundary, a few 1e-3 apart with or without rows.
            tol = 1e-4 if dtype == "fp32" else 1e-2
            for g, r, rw in zip(got[n:], reqs[n:], rows):
                lp, exp = g.get("output_log_probs", []), soft_reference(model, r["ids"], rw, dtype, g["output_ids"])
                check(len(lp) == len(exp) and all(abs(a - b) <= tol for a, b in zip(lp, exp)),
                      f"{what}: sampled request {g['index']}: output_log_probs {lp} != reference {exp}")
            for g, r in zip(got, reqs):
                check(g["input_length"] == len(r["ids"]) and
                      g["sequence_length"] == len(r["ids"]) + len(g["output_ids"]),
                      f"{what}: request {g['index']}: input_length {g['input_length']}, sequence_length "
                      f"{g['sequence_length']} (FT's: the ids without the rows)")
            # Sampled, the whole line (a preempted request's recomputed logits may round otherwise).
            check(got[4]["output_ids"] == got[0]["output_ids"] and
                  ("--kv-cache-memory" in extra or got[n + 4] == dict(got[n], index=n + 4)),
                  f"{what}: the .npy and the inline rows differ")


def test_I49_soft_prompt_of_a_tables_rows_equals_the_task(tmp):
    V = eng.MODELS["gpt2"]["vocab"]
    for tp in (1, 2):
        d = copy_model(tmp, "gpt2", tp)
        ok(ftx("prompt-convert", "-i", os.path.join(PF, "classic.nemo"), "--model-dir", d, "-q"), f"tables {d}")
        table = np.fromfile(os.path.join(d, "model.prompt_table.squad.weight.bin"), dtype=np.float16)
        rows = table.reshape(-1, 64).astype(np.float32)
        reqs = [{"ids": [V, V + 1, V + 2, 5, 17, 42, 8], "task": "squad"},
                {"ids": [5, 17, 42, 8], "request_prompt_type": 1, "request_prompt_embedding": rows.tolist()}]
        for extra in ((), ("--dtype", "bf16")):
            got = soft_run(tmp, d, reqs, extra, mpi=2 if tp == 2 else 0)
            if got is not None:
                check(got[0]["output_ids"] == got[1]["output_ids"],
                      f"tp{tp} {extra}: soft prompt {got[1]['output_ids']} != task squad {got[0]['output_ids']}")


def test_I49_soft_prompt_refusals(tmp):
    d = os.path.join(ENG, "gpt2", "1-gpu")
    rows = soft_rows(3, 2).tolist()
    npy_narrow, npy_int, npy_missing = (os.path.join(tmp, n) for n in ("narrow.npy", "int.npy", "missing.npy"))
    np.save(npy_narrow, np.zeros((2, 32), np.float32))
    np.save(npy_int, np.zeros((2, 64), np.int32))
    one = {"ids": [1, 2], "request_prompt_type": 1}
    cases = [
        (dict(one, request_prompt_embedding=[rows[0], rows[1][:63]]), "row 1 has 63 numbers: rows must be the "
         "model's hidden size 64", "narrow inline row"),
        (dict(one, request_prompt_embedding=npy_narrow), "shape [2, 32] is not [rows, 64]", "narrow .npy"),
        (dict(one, request_prompt_embedding=npy_int), "dtype int32 is not float32 or float16", ".npy dtype"),
        (dict(one, request_prompt_embedding=npy_missing), "missing.npy", "missing .npy"),
        (dict(one, request_prompt_type=7, request_prompt_embedding=rows), "\"request_prompt_type\" 7 is not 0",
         "type 7"),
        (dict(one, request_prompt_type=2, request_prompt_embedding=rows), "\"request_prompt_type\" 2 (a prefix prompt",
         "type 2"),
        (dict(one, request_prompt_type=3, request_prompt_embedding=rows), "\"request_prompt_type\" 3 (p-tuning rows",
         "type 3"),
        (one, "\"request_prompt_type\" 1 (a soft prompt) needs \"request_prompt_embedding\"", "type 1 without rows"),
        ({"ids": [1], "request_prompt_embedding": rows}, "\"request_prompt_embedding\" needs \"request_prompt_type\"",
         "rows without a type"),
        ({"ids": [1], "request_prompt_type": 0, "request_prompt_embedding": rows},
         "\"request_prompt_embedding\" given with \"request_prompt_type\" 0", "rows with type 0"),
        (dict(one, request_prompt_embedding=rows, request_prompt_lengths=3), "\"request_prompt_lengths\" 3 outside [1, 2]",
         "length beyond the rows"),
        (dict(one, request_prompt_embedding=rows, session="s"), "cannot start a \"session\" round", "with a session"),
        (dict(one, request_prompt_embedding=rows, return_context_log_probs=True), "\"return_context_log_probs\" with a "
         "soft prompt", "with context log probs"),
    ]
    for req, want, what in cases:
        error(["generate", "-m", d, "--prompts", "-", "--max-new-tokens", "2", "--output", "-"], "line 1 (prompt 1): " ,
              what + " (names the request)", stdin=json.dumps(req) + "\n")
        error(["generate", "-m", d, "--prompts", "-", "--max-new-tokens", "2", "--output", "-"], want, what,
              stdin=json.dumps(req) + "\n")
    t = copy_model(tmp, "gpt2")
    ok(ftx("prompt-convert", "-i", os.path.join(PF, "classic.nemo"), "--model-dir", t, "-q"), "tables")
    error(["generate", "-m", t, "--prompts", "-", "--max-new-tokens", "2", "--output", "-"],
          "\"task\" cannot be combined with a soft prompt", "with a task",
          stdin=json.dumps(dict(one, request_prompt_embedding=rows, task="squad")) + "\n")


def main():
    part = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"convert": test_convert, "generate": test_generate, "errors": test_errors,
         "soft": lambda t: (test_I49_soft_prompt_equals_the_reference_over_its_rows(t),
                            test_I49_soft_prompt_of_a_tables_rows_equals_the_task(t)),
         "soft_errors": test_I49_soft_prompt_refusals}[part](tmp)
    finish("prompt e2e")


if __name__ == "__main__":
    main()
