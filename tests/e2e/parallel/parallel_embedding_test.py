#!/usr/bin/python3
"""Vocabulary-parallel embedding (issue 49; lib/engine/embedding_sharding.h): --use-parallel-embedding,
--embedding-sharding-dim 0|1 and --use-embedding-sharing under mpirun give the tokens of one rank.

Usage: parallel_embedding_test.py {engine|hf|errors|lambada}
  engine  the engine fixtures' GPT-2 (tied, learned positions, vocabulary 301: padded at TP 2 and 4)
          and GPT-J (untied lm_head with a bias, rotary, vocabulary 300), written here at TP 1, 2 and 4
          by scripts/fixtures/make_engine_models.py (the fixtures' own writer and seeds).
  hf      a tiny Llama saved by transformers (vocabulary 301, 4 KV heads), tied and untied, converted
          by `ftx convert-hf -g 1|2|4`.
          For both: at TP 2 and 4, each of dim 0, dim 0 with sharing (tied models only) and dim 1,
          `ftx generate --verbose` greedy (with log probs and context log probs) and seeded top-p
          sampling equal the plain TP 1 run (and, greedy, TP 2 x PP 2 with dim 0; engine part: dim 0
          with --int8-mode 1 --int8-lm-head equals TP 2 without the split): output ids
          identical, log probs within 1e-5; and each
          rank's --verbose line gives the embedding and lm_head bytes the split implies on the CPU
          (fp32): dim 0 (ceil(V/T) + 1) x H x 4 (its rows and the zero row), dim 1 V x H/T x 4, the
          lm_head ceil(V/T) x H x 4 (+ ceil(V/T) x 4 for a bias), 0 when it shares the embedding's.
  errors  bad flag combinations are refused by name, on every rank, before anything runs:
          --embedding-sharding-dim without --use-parallel-embedding, --embedding-sharding-dim 2,
          --use-embedding-sharing at TP 2 without --use-parallel-embedding or with dim 1 (TensorRT-LLM's
          rule), with --pipeline-para-size 2, with --int8-lm-head, and on a model with its own lm_head
          (naming model.lm_head.weight.bin).
  lambada eval-lambada (the flags are shared) on the pp fixtures' GPT-2 with GPT-2's vocabulary (50257,
          padded at TP 2): dim 0 with sharing and dim 1 at TP 2 give one rank's per-example results
          (floats within 1e-5), on the first 24 examples.
Environment: FTX_BIN, FTX_SOURCE_DIR (the repository, for the fixture writer), FTX_FIXTURES (lambada). Needs torch (engine) and
transformers (hf).
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish, mpirun  # noqa: E402

FTX = os.environ["FTX_BIN"]
SRC = os.environ.get("FTX_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOL = 1e-5
VERBOSE = re.compile(r"ftx: rank (\d+) .*embedding table (\d+) bytes.*lm_head table (\d+) bytes")


def run_ftx(args, ranks=1, timeout=300):
    cmd = (mpirun(ranks) if ranks > 1 else []) + [FTX, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          timeout=timeout)


def write_prompts(path, vocab):
    """Ids from every rank's range at TP 2 and 4, the ranges' edges and the last id among them."""
    edges = sorted({min(vocab - 1, math.ceil(vocab / t) * r + d) for t in (2, 4) for r in range(1, t) for d in (-1, 0)})
    prompts = [[1, 2, 3], edges[:6], [vocab - 1, 5, 77, 150, 151, 230, 299 % vocab], [42]]
    with open(path, "w") as f:
        f.write("\n".join(",".join(str(i) for i in p) for p in prompts) + "\n")
    return path


MODES = {
    "greedy": ["--return-log-probs", "--return-context-log-probs"],
    "top_p": ["--top-p", "0.9", "--temperature", "1.3", "--seed", "7", "--return-log-probs"],
}


def generate(tmp, folder, prompts, ranks, name, mode, flags):
    out = os.path.join(tmp, f"{name}.{mode}.jsonl")
    args = ["generate", "-m", folder, "--input-ids", prompts, "--max-new-tokens", "6", "--output", out, "--force",
            "--quiet", *MODES[mode], *flags]
    r = run_ftx(args, ranks)
    if not check(r.returncode == 0, f"{name} {mode}: exit {r.returncode}: {r.stderr.strip()[-800:]}"):
        return None, r
    with open(out) as f:
        return [json.loads(l) for l in f], r


def close(a, b, what):
    for i, (x, y) in enumerate(zip(a, b)):
        if not check(x["output_ids"] == y["output_ids"], f"{what} row {i}: ids {y['output_ids']} != TP 1's {x['output_ids']}"):
            continue
        for key in ("output_log_probs", "context_log_probs"):
            if key not in x:
                continue
            fx, fy = json.dumps(x[key]), json.dumps(y[key])
            vx, vy = [float(v) for v in re.findall(r"-?[\d.e+-]+", fx)], [float(v) for v in re.findall(r"-?[\d.e+-]+", fy)]
            worst = max((abs(p - q) for p, q in zip(vx, vy)), default=0.0)
            check(len(vx) == len(vy) and worst <= TOL, f"{what} row {i}: {key} {worst:.3g} from TP 1's (> {TOL})")
    check(len(a) == len(b), f"{what}: {len(b)} rows, TP 1 has {len(a)}")


def expected_bytes(vocab, hidden, tp, dim, share, tied, head_bias):
    rows = math.ceil(vocab / tp)
    emb = (rows + 1) * hidden * 4 if dim == 0 else vocab * (hidden // tp) * 4
    head = 0 if share else rows * hidden * 4 + (rows * 4 if head_bias else 0)
    return emb, head


def check_verbose(stderr, what, ranks, want):
    """want: (embedding, lm_head) bytes of every rank, or a function of the world rank giving them."""
    seen = {}
    for m in VERBOSE.finditer(stderr):
        seen[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    if not check(sorted(seen) == list(range(ranks)), f"{what}: --verbose lines from ranks {sorted(seen)}:\n{stderr[-600:]}"):
        return
    for rank, got in seen.items():
        w = want(rank) if callable(want) else want
        check(got == w, f"{what}: rank {rank} holds embedding {got[0]} and lm_head {got[1]} bytes, expected {w}")


def check_model(tmp, name, root, vocab, hidden, tied, head_bias):
    """root/{1,2,4}-gpu: every split at TP 2 and 4 against the plain TP 1 run."""
    prompts = write_prompts(os.path.join(tmp, f"{name}.csv"), vocab)
    for mode in MODES:
        base, r1 = generate(tmp, os.path.join(root, "1-gpu"), prompts, 1, f"{name}.tp1", mode, ["--verbose"])
        if base is None:
            return
        if mode == "greedy":  # the whole table on one rank: V x H, read by the lm_head too when tied
            check_verbose(r1.stderr, f"{name} TP 1", 1,
                          (vocab * hidden * 4, 0 if tied else vocab * hidden * 4 + (vocab * 4 if head_bias else 0)))
        for tp in (2, 4):
            for dim, share in [(0, False), (0, True), (1, False)]:
                if share and not tied:
                    continue
                flags = ["--use-parallel-embedding", "--embedding-sharding-dim", str(dim), "--verbose"]
                flags += ["--use-embedding-sharing"] if share else []
                what = f"{name} TP {tp} dim {dim}{' shared' if share else ''} {mode}"
                got, r = generate(tmp, os.path.join(root, f"{tp}-gpu"), prompts, tp, what.replace(" ", "_"), mode, flags)
                if got is None:
                    continue
                close(base, got, what)
                check_verbose(r.stderr, what, tp, expected_bytes(vocab, hidden, tp, dim, share, tied, head_bias))
        if mode == "greedy":  # TP 2 x PP 2: stage 0 holds the embedding slices, stage 1 the lm_head's
            what = f"{name} TP 2 x PP 2 dim 0 {mode}"
            got, r = generate(tmp, os.path.join(root, "2-gpu"), prompts, 4, what.replace(" ", "_"), mode,
                              ["--use-parallel-embedding", "--verbose", "--tensor-para-size", "2",
                               "--pipeline-para-size", "2"])
            if got is not None:
                close(base, got, what)
                emb, head = expected_bytes(vocab, hidden, 2, 0, False, tied, head_bias)
                check_verbose(r.stderr, what, 4, lambda rank: (emb, 0) if rank < 2 else (0, head))


def test_engine(tmp):
    sys.path.insert(0, os.path.join(SRC, "scripts", "fixtures"))
    import torch
    import make_engine_models as mk
    for name in ("gpt2", "gptj"):
        m = mk.MODELS[name]
        W = mk.make_weights(m, torch.Generator().manual_seed(1234 + list(mk.MODELS).index(name)))
        root = os.path.join(tmp, name)
        for tp in (1, 2, 4):
            mk.write_ft(name, m, W, os.path.join(root, f"{tp}-gpu"), tp)
        check_model(tmp, name, root, m["vocab"], m["heads"] * m["head_dim"], m["tied"], not m["tied"] and name == "gptj")
        # --int8-lm-head quantises each vocabulary row on its own, so a rank's slice is quantised as the
        # whole table is: at TP 2 the split gives the unsplit run's tokens (the layers' int8 blocks
        # depend on TP, so TP 1 is not the reference here). The lm_head slice: rows x H int8 + a scale per row.
        prompts = os.path.join(tmp, f"{name}.csv")
        int8 = ["--int8-mode", "1", "--int8-lm-head", "--verbose"]
        base, _ = generate(tmp, os.path.join(root, "2-gpu"), prompts, 2, f"{name}.int8", "greedy", int8)
        got, r = generate(tmp, os.path.join(root, "2-gpu"), prompts, 2, f"{name}.int8_split", "greedy",
                          int8 + ["--use-parallel-embedding"])
        if base is not None and got is not None:
            what = f"{name} TP 2 dim 0 --int8-lm-head"
            close(base, got, what)
            emb, _ = expected_bytes(m["vocab"], m["heads"] * m["head_dim"], 2, 0, False, m["tied"], False)
            rows, hidden = math.ceil(m["vocab"] / 2), m["heads"] * m["head_dim"]
            bias = rows * 4 if name == "gptj" else 0
            check_verbose(r.stderr, what, 2, (emb, rows * hidden + rows * 4 + bias))


def make_llama(folder, tied):
    import torch
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=301, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                                   rms_norm_eps=1e-5, tie_word_embeddings=tied, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(49)
    model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():
        for n, t in model.named_parameters():
            t.copy_(1.0 + 0.1 * torch.randn_like(t) if "norm" in n else 0.3 * torch.randn_like(t))
    model.save_pretrained(folder, safe_serialization=True)


def test_hf(tmp):
    for tied in (False, True):
        name = "llama_tied" if tied else "llama"
        hf = os.path.join(tmp, name + "_hf")
        make_llama(hf, tied)
        root = os.path.join(tmp, name)
        ok = True
        for tp in (1, 2, 4):
            r = run_ftx(["convert-hf", "-i", hf, "-o", root, "-g", str(tp), "-t", "fp32"])
            ok &= check(r.returncode == 0, f"convert-hf -g {tp} of {name}: {r.stderr.strip()[-600:]}")
        if ok:
            check(os.path.exists(os.path.join(root, "1-gpu", "model.lm_head.weight.bin")) != tied,
                  f"{name}: convert-hf wrote model.lm_head.weight.bin only for the untied model")
            check_model(tmp, name, root, 301, 64, tied, False)


def refused(tmp, root, tp, flags, needle, pp=1):
    args = ["generate", "-m", os.path.join(root, f"{tp}-gpu"), "--input-ids", os.path.join(tmp, "e.csv"),
            "--max-new-tokens", "2", "--output", os.path.join(tmp, "e.jsonl"), "--force", *flags]
    if pp > 1:
        args += ["--tensor-para-size", str(tp), "--pipeline-para-size", str(pp)]
    r = run_ftx(args, tp * pp, timeout=120)
    what = " ".join(flags)
    check(r.returncode != 0, f"{what}: accepted")
    lines = [l for l in r.stderr.splitlines() if l.startswith("ftx: error:")]
    check(lines and all(needle in l for l in lines), f"{what}: expected errors naming {needle!r}, got:\n{r.stderr[-800:]}")
    check(not os.path.exists(os.path.join(tmp, "e.jsonl")), f"{what}: an output file was written")


def test_errors(tmp):
    sys.path.insert(0, os.path.join(SRC, "scripts", "fixtures"))
    import torch
    import make_engine_models as mk
    for name in ("gpt2", "gptj"):
        m = mk.MODELS[name]
        W = mk.make_weights(m, torch.Generator().manual_seed(1234 + list(mk.MODELS).index(name)))
        for tp in (1, 2):
            mk.write_ft(name, m, W, os.path.join(tmp, name, f"{tp}-gpu"), tp)
    with open(os.path.join(tmp, "e.csv"), "w") as f:
        f.write("1,2,3\n")
    gpt2, gptj = os.path.join(tmp, "gpt2"), os.path.join(tmp, "gptj")
    refused(tmp, gpt2, 1, ["--embedding-sharding-dim", "1"], "--embedding-sharding-dim 1 applies with --use-parallel-embedding")
    refused(tmp, gpt2, 1, ["--use-parallel-embedding", "--embedding-sharding-dim", "2"], "--embedding-sharding-dim")
    refused(tmp, gpt2, 2, ["--use-embedding-sharing"], "--use-embedding-sharing with --tensor-para-size 2 needs")
    refused(tmp, gpt2, 2, ["--use-parallel-embedding", "--embedding-sharding-dim", "1", "--use-embedding-sharing"],
            "--use-embedding-sharing with --tensor-para-size 2 needs")
    refused(tmp, gpt2, 1, ["--use-parallel-embedding", "--use-embedding-sharing"], "--pipeline-para-size 2", pp=2)
    refused(tmp, gpt2, 1, ["--use-parallel-embedding", "--use-embedding-sharing", "--int8-mode", "1", "--int8-lm-head"],
            "--int8-lm-head")
    refused(tmp, gptj, 2, ["--use-parallel-embedding", "--use-embedding-sharing"], "model.lm_head.weight.bin")


def test_lambada(tmp):
    """eval-lambada shares the flags: at TP 2 each split gives one rank's per-example results."""
    fix = os.path.join(os.environ["FTX_FIXTURES"], "pp", "gpt2_bpe")
    res = {}
    for name, tp, flags in [("tp1", 1, []), ("dim0_shared", 2, ["--use-parallel-embedding", "--use-embedding-sharing"]),
                            ("dim1", 2, ["--use-parallel-embedding", "--embedding-sharding-dim", "1"])]:
        out = os.path.join(tmp, f"lambada_{name}.jsonl")
        r = run_ftx(["eval-lambada", "-m", os.path.join(fix, f"{tp}-gpu"), "--max-examples", "24", "--batch-size", "8",
                     "--output", out, "--force", "--quiet", *flags], tp)
        if not check(r.returncode == 0, f"eval-lambada {name}: exit {r.returncode}: {r.stderr.strip()[-800:]}"):
            return
        with open(out) as f:
            res[name] = [json.loads(l) for l in f]
    check(len(res["tp1"]) == 24, f"eval-lambada: {len(res['tp1'])} results, expected 24")
    for name in ("dim0_shared", "dim1"):
        for a, b in zip(res["tp1"], res[name]):
            for k in a:
                same = abs(a[k] - b[k]) <= TOL if isinstance(a[k], float) else a[k] == b[k]
                check(same, f"eval-lambada {name} example {a.get('index')}: {k} {b[k]!r} != TP 1's {a[k]!r}")


def main():
    part = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"engine": test_engine, "hf": test_hf, "errors": test_errors, "lambada": test_lambada}[part](tmp)
    finish(f"parallel_embedding {part}")


if __name__ == "__main__":
    main()
