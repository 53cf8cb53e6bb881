#!/usr/bin/env python3
"""`ftx eval-lambada` against an independent float64 PyTorch computation of both protocols.

A tiny random GPT-2 with GPT-2's vocabulary is written by PyTorch (scripts/make_tiny_gpt2.py),
converted by `ftx convert-hf` (TP 1 and 2). The reference tokenizes with an independent Python
GPT-2 BPE (scripts/fixtures/gpt2_bpe_reference.py), splits each text as FT's scripts do
(docs/runtime.md#lambada) and runs tests/reference/gpt_reference.py in float64. For the first N examples:
 * every per-example field equals the reference: last-token target and prediction, word target
   ids and greedy word prediction, correctness flags (a prediction may differ only where the
   reference's top two logits are within 1e-4, a tie at fp32 precision; none are expected);
 * word log-likelihood within 1e-4 absolute of the reference; both accuracies equal;
 * batch size 1 and 16, and TP=2 under mpirun, give the same predictions;
 * bad inputs: a malformed JSON line (error names its line number), an empty file, a model
   folder without a tokenizer.
"""
import json
import os
import shutil
import subprocess
import sys

import torch

SRC = os.environ["FTX_SOURCE_DIR"]
FTX = os.environ["FTX_BIN"]
OUT = os.path.join(os.environ["FTX_FIXTURES"], "lambada")
PY = os.environ.get("FTX_TORCH_PYTHON", sys.executable)
N = int(os.environ.get("FTX_LAMBADA_EXAMPLES", "200"))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
sys.path.insert(0, os.path.join(SRC, "scripts", "fixtures"))
import gpt_reference  # noqa: E402
from gpt2_bpe_reference import Encoder  # noqa: E402

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def make_model():
    hf = os.path.join(OUT, "hf")
    subprocess.run([PY, os.path.join(SRC, "scripts", "make_tiny_gpt2.py"), hf, "--layers", "2", "--hidden", "32",
                    "--heads", "4", "--positions", "512", "--seed", "7"], check=True, capture_output=True)
    for tp in (1, 2):
        r = run([FTX, "convert-hf", "-i", hf, "-o", os.path.join(OUT, "ft"), "-g", str(tp), "--force", "--quiet"])
        assert r.returncode == 0, r.stderr
    sd = torch.load(os.path.join(hf, "pytorch_model.bin"), map_location="cpu")
    cfgj = json.load(open(os.path.join(hf, "config.json")))
    H, nh = cfgj["n_embd"], cfgj["n_head"]
    g = lambda k: sd["transformer." + k].to(torch.float64)  # noqa: E731
    layers = []
    for i in range(cfgj["n_layer"]):
        p = f"h.{i}."
        w, b = g(p + "attn.c_attn.weight"), g(p + "attn.c_attn.bias")  # Conv1D: [in, out]
        layers.append({
            "ln1": (g(p + "ln_1.weight"), g(p + "ln_1.bias")), "ln2": (g(p + "ln_2.weight"), g(p + "ln_2.bias")),
            "wq": w[:, :H], "wk": w[:, H:2 * H], "wv": w[:, 2 * H:], "bq": b[:H], "bk": b[H:2 * H], "bv": b[2 * H:],
            "wo": g(p + "attn.c_proj.weight"), "bo": g(p + "attn.c_proj.bias"),
            "w1": g(p + "mlp.c_fc.weight"), "b1": g(p + "mlp.c_fc.bias"),
            "w2": g(p + "mlp.c_proj.weight"), "b2": g(p + "mlp.c_proj.bias")})
    W = {"wte": g("wte.weight"), "wpe": g("wpe.weight"), "final_ln": (g("ln_f.weight"), g("ln_f.bias")),
         "layers": layers}
    cfg = {"heads": nh, "kv_heads": nh, "head_dim": H // nh, "eps": cfgj["layer_norm_epsilon"], "norm": "pre",
           "parallel_residual": False, "shared_input_norm": False, "activation": "gelu_tanh",
           "position": "learned"}
    return cfg, W


def split_ft(text):
    """FT lambada_task_example.py: label " " + last word; context before its last occurrence,
    stripped. ftx's documented fallback when the label is not preceded by a space."""
    word = text.split()[-1]
    label = " " + word
    cut = text.rfind(label)
    if cut < 0:
        cut = len(text.rstrip()) - len(word)
    return text[:cut].strip(), label


def top_gap(logits, a, b):
    return abs(float(logits[a]) - float(logits[b]))


def reference(cfg, W, texts, enc=None):
    """`enc`: an independent tokenizer with .encode(text) (default: the Python GPT-2 BPE)."""
    enc = enc or Encoder(os.path.join(SRC, "data", "gpt2"))
    out = []
    for i, text in enumerate(texts):
        full = enc.encode(text)
        lt_logits = gpt_reference.forward(cfg, W, full[:-1])[-1]
        ctx, label = split_ft(text)
        ctx_ids, word = enc.encode(ctx), enc.encode(label)
        teacher = gpt_reference.forward(cfg, W, ctx_ids + word[:-1])[len(ctx_ids) - 1:]
        logp = torch.log_softmax(teacher, dim=-1)
        pred, seq, step_logits = [], list(ctx_ids), []
        for k in range(len(word)):  # true greedy generation
            lg = teacher[k] if pred == word[:k] else gpt_reference.forward(cfg, W, seq)[-1]
            step_logits.append(lg)
            t = int(torch.argmax(lg))
            pred.append(t)
            seq.append(t)
        out.append({"index": i, "last_token_target": full[-1], "last_token_predicted": int(torch.argmax(lt_logits)),
                    "word_target_ids": word, "word_predicted_ids": pred,
                    "word_logprob": float(sum(logp[k, word[k]] for k in range(len(word)))),
                    "_lt_logits": lt_logits, "_step_logits": step_logits})
    return out


def compare(tag, got, ref):
    if not check(len(got) == len(ref), f"{tag}: {len(got)} results, expected {len(ref)}"):
        return
    for g, r in zip(got, ref):
        i = r["index"]
        check(g["index"] == i, f"{tag}: index {g['index']} != {i}")
        check(g["last_token_target"] == r["last_token_target"], f"{tag} #{i}: last token target")
        if g["last_token_predicted"] != r["last_token_predicted"]:
            check(top_gap(r["_lt_logits"], g["last_token_predicted"], r["last_token_predicted"]) < 1e-4,
                  f"{tag} #{i}: last token predicted {g['last_token_predicted']} != {r['last_token_predicted']}")
        check(g["last_token_correct"] == (g["last_token_predicted"] == g["last_token_target"]), f"{tag} #{i}: flag")
        check(g["word_target_ids"] == r["word_target_ids"], f"{tag} #{i}: word target {g['word_target_ids']} "
              f"!= {r['word_target_ids']}")
        if g["word_predicted_ids"] != r["word_predicted_ids"]:
            k = next(k for k, (a, b) in enumerate(zip(g["word_predicted_ids"], r["word_predicted_ids"])) if a != b)
            check(top_gap(r["_step_logits"][k], g["word_predicted_ids"][k], r["word_predicted_ids"][k]) < 1e-4,
                  f"{tag} #{i}: word predicted {g['word_predicted_ids']} != {r['word_predicted_ids']}")
        check(g["word_correct"] == (g["word_predicted_ids"] == g["word_target_ids"]), f"{tag} #{i}: word flag")
        check(abs(g["word_logprob"] - r["word_logprob"]) < 1e-4,
              f"{tag} #{i}: word logprob {g['word_logprob']} vs {r['word_logprob']}")


def ftx_eval(tag, model, batch, mpi=0):
    out = os.path.join(OUT, f"{tag}.jsonl")
    summ = os.path.join(OUT, f"{tag}.summary.json")
    cmd = [FTX, "eval-lambada", "-m", model, "--max-examples", str(N), "--batch-size", str(batch),
           "--output", out, "--summary-json", summ, "--force", "--quiet"]
    if mpi:
        cmd = ["mpirun", "-np", str(mpi), "--oversubscribe", "--allow-run-as-root"] + cmd + ["--threads", "1"]
    r = run(cmd)
    if not check(r.returncode == 0, f"{tag}: exit {r.returncode}: {r.stderr.strip()[-500:]}"):
        return None, None, ""
    return [json.loads(l) for l in open(out)], json.load(open(summ)), r.stdout


def main():
    os.makedirs(OUT, exist_ok=True)
    cfg, W = make_model()
    texts = [json.loads(l)["text"] for l in open(os.path.join(SRC, "data", "lambada", "lambada_test.jsonl"))][:N]
    ref = reference(cfg, W, texts)
    ref_lt = sum(r["last_token_predicted"] == r["last_token_target"] for r in ref)
    ref_word = sum(r["word_predicted_ids"] == r["word_target_ids"] for r in ref)
    runs = [("tp1_b16", os.path.join(OUT, "ft", "1-gpu"), 16, 0),
            ("tp1_b1", os.path.join(OUT, "ft", "1-gpu"), 1, 0)]
    if shutil.which("mpirun"):
        runs.append(("tp2_b16", os.path.join(OUT, "ft", "2-gpu"), 16, 2))
    first = None
    sections = []  # (name, passed)
    for tag, model, batch, mpi in runs:
        before = len(failures)
        got, summ, stdout = ftx_eval(tag, model, batch, mpi)
        if got is None:
            continue
        compare(tag, got, ref)
        check(summ["last_token_correct"] == ref_lt and summ["word_correct"] == ref_word,
              f"{tag}: accuracy {summ} vs reference last-token {ref_lt}, word {ref_word}")
        check(f"[INFO] last token accuracy: {100.0 * ref_lt / N:5.2f}% (total token num: {N})" in stdout,
              f"{tag}: summary line: {stdout}")
        check(f"[INFO] accuracy: {100.0 * ref_word / N:0.4f}% (total : {N})" in stdout, f"{tag}: summary: {stdout}")
        preds = [(g["last_token_predicted"], g["word_predicted_ids"]) for g in got]
        if first is None:
            first = preds
        else:
            check(preds == first, f"{tag}: predictions differ from {runs[0][0]}")
        sections.append((tag, len(failures) == before))
        print(f"{'ok  ' if sections[-1][1] else 'FAIL'} {tag}: {N} examples")

    # Bad inputs.
    before = len(failures)
    model = os.path.join(OUT, "ft", "1-gpu")
    bad = os.path.join(OUT, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"text": "one two"}\n{"text": "three four"}\n{"text": broken\n')
    r = run([FTX, "eval-lambada", "-m", model, "--data", bad, "--quiet"])
    check(r.returncode == 1 and "line 3" in r.stderr and "bad.jsonl" in r.stderr, f"malformed line: {r.stderr}")
    empty = os.path.join(OUT, "empty.jsonl")
    open(empty, "w").close()
    r = run([FTX, "eval-lambada", "-m", model, "--data", empty, "--quiet"])
    check(r.returncode == 1 and "empty" in r.stderr, f"empty file: {r.stderr}")
    bare = os.path.join(OUT, "no_tokenizer", "1-gpu")
    shutil.rmtree(os.path.dirname(bare), ignore_errors=True)
    shutil.copytree(model, bare, ignore=shutil.ignore_patterns("vocab.json", "merges.txt", "tokenizer*"))
    r = run([FTX, "eval-lambada", "-m", bare, "--quiet"])
    check(r.returncode == 1 and "tokenizer" in r.stderr, f"missing tokenizer: {r.stderr}")
    sections.append(("bad inputs", len(failures) == before))
    print(f"{'ok  ' if sections[-1][1] else 'FAIL'} bad inputs")

    for f in failures[:30]:
        print(f, file=sys.stderr)
    passed = sum(ok for _, ok in sections)
    print(f"{passed} passed, {len(sections) - passed} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
