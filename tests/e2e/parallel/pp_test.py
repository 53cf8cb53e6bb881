#!/usr/bin/python3
"""Pipeline parallelism end to end: every TP x PP grid under mpirun gives what one rank gives.

Usage: pp_test.py {generate MODEL|lambada|errors|cuda}
  generate MODEL: for each grid TP x PP in {1x2, 2x2, 1x4, 2x1} (the 5-layer model: 1x2, 2x2, 1x4,
          stages of unequal size) `ftx generate` under `mpirun --oversubscribe` equals the same run
          on one rank (TP 1 x PP 1, the 1-gpu folder): output ids identical, log probs, cumulative
          log probs and context embeddings within 1e-5 + 2e-6 |x| (fp32: TP sums partial
          products in another order; context embeddings reach |x| ~ 10). Modes: greedy (with log probs and context
          embeddings), beam search (width 3), seeded top-p, and a JSON-lines file with session
          rounds (appends after a cached context), per-request stop words and --stream, at batch
          size 2 (continuous batching admits while others decode). The streamed lines must match too.
  lambada: `ftx eval-lambada` at TP 2 x PP 2 gives the per-example results of one rank (equal
          predictions and flags; word log-likelihood within 1e-5), on the first 40 examples.
  errors: a rank count other than T x P, P larger than the number of layers, a T-gpu folder run at
          another TP size: exit code non-zero
          and one `ftx: error:` line from each rank, naming the problem; no rank hangs (timeout).
  cuda:   (label gpu) --device cuda with NCCL send/recv between stages: TP 1 x PP 2 and TP 2 x PP 1
          give the greedy tokens of one CPU rank (log probs within 1e-3: TF32 GEMMs). Skipped
          (exit 77) with fewer GPUs than ranks (2) or an ftx built without CUDA.
Environment: FTX_BIN, FTX_FIXTURES (fixtures in $FTX_FIXTURES/pp, scripts/fixtures/make_pp_models.py).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish, mpirun  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "pp")
TOL = 1e-5
REL_TOL = 2e-6
GRIDS = [(1, 2), (2, 2), (1, 4), (2, 1)]


def run_ftx(args, tp=1, pp=1, timeout=240):
    n = tp * pp
    cmd = (mpirun(n) if n > 1 else []) + [FTX, *args]
    if n > 1:
        cmd += ["--tensor-para-size", str(tp), "--pipeline-para-size", str(pp)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def close(a, b, path):
    """Exact for ints, strings and bools; floats within TOL; recursive over lists and dicts."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, (int, str)) and isinstance(b, (int, str)):
        return check(a == b, f"{path}: {a!r} != {b!r}")
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        tol = TOL + REL_TOL * max(abs(a), abs(b))
        return check(abs(a - b) <= tol, f"{path}: {a} vs {b} (more than {tol:.3g} apart)")
    if isinstance(a, list) and isinstance(b, list):
        if not check(len(a) == len(b), f"{path}: {len(a)} items vs {len(b)}"):
            return False
        return all([close(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b))])
    if isinstance(a, dict) and isinstance(b, dict):
        if not check(sorted(a) == sorted(b), f"{path}: keys {sorted(a)} vs {sorted(b)}"):
            return False
        return all([close(a[k], b[k], f"{path}.{k}") for k in a])
    return check(a == b, f"{path}: {a!r} != {b!r}")


def generate(tmp, model, tp, pp, name, prompts_args, extra):
    folder = os.path.join(FIX, model, f"{tp}-gpu")
    out = os.path.join(tmp, name + ".jsonl")
    r = run_ftx(["generate", "-m", folder, *prompts_args, "--max-new-tokens", "6", "--output", out, "--force",
                 "--quiet", *extra], tp, pp)
    if not check(r.returncode == 0, f"{model} {tp}x{pp} {name}: exit {r.returncode}: {r.stderr.strip()[-800:]}"):
        return None
    with open(out) as f:
        results = [json.loads(l) for l in f]
    stream = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    return results, stream


def session_prompts(tmp, model, greedy):
    """Session rounds and stop words (token ids, so no tokenizer is needed)."""
    with open(os.path.join(FIX, model, "start_ids.csv")) as f:
        prompts = [[int(t) for t in l.split(",")] for l in f if l.strip()]
    lines = []
    for i, p in enumerate(prompts):
        req = {"ids": p}
        if i % 2 == 0:  # a stop word that the greedy continuation reaches at its third token
            req["stop_words"] = [[greedy[i]["output_ids"][2]]]
        lines.append(req)
    lines += [{"ids": prompts[1], "session": "a"}, {"ids": prompts[2], "session": "b"},
              {"ids": prompts[0], "session": "a"}, {"ids": prompts[3], "session": "b", "session_end": True},
              {"ids": prompts[4], "session": "a", "beam_width": 1, "top_p": 0.8, "seed": 3}]
    path = os.path.join(tmp, f"{model}_sessions.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(l) for l in lines) + "\n")
    return path


def test_generate(model):
    csv = ["--input-ids", os.path.join(FIX, model, "start_ids.csv")]
    modes = {
        "greedy": (csv, ["--return-log-probs", "--return-context-embeddings"]),
        "beam3": (csv, ["--beam-width", "3", "--return-cum-log-probs"]),
        "topp": (csv, ["--top-p", "0.9", "--seed", "7", "--return-log-probs"]),
    }
    grids = GRIDS if model != "gpt2_5" else [(1, 2), (2, 2), (1, 4)]
    with tempfile.TemporaryDirectory() as tmp:
        base = {}
        for mode, (prompts, extra) in modes.items():
            base[mode] = generate(tmp, model, 1, 1, f"base_{mode}", prompts, extra)
        if base["greedy"] is None:
            return
        sessions = ["--prompts", session_prompts(tmp, model, base["greedy"][0])]
        modes["sessions"] = (sessions, ["--batch-size", "2", "--stream", "--return-log-probs"])
        base["sessions"] = generate(tmp, model, 1, 1, "base_sessions", *modes["sessions"])
        stopped = [r for r in base["sessions"][0] if r["index"] in (0, 2, 4)]
        check(all(len(r["output_ids"]) < 6 for r in stopped), f"{model}: the stop words end generation early")
        for tp, pp in grids:
            for mode, (prompts, extra) in modes.items():
                got = generate(tmp, model, tp, pp, f"{mode}_{tp}x{pp}", prompts, extra)
                if got is None or base[mode] is None:
                    continue
                ok = close(got[0], base[mode][0], f"{model} {tp}x{pp} {mode}")
                ok &= close(got[1], base[mode][1], f"{model} {tp}x{pp} {mode} stream")
                print(f"{model} TP {tp} x PP {pp} {mode}: {'same as one rank' if ok else 'DIFFERENT'}")


def test_lambada():
    with tempfile.TemporaryDirectory() as tmp:
        res = {}
        for tp, pp in ((1, 1), (2, 2)):
            out = os.path.join(tmp, f"lambada_{tp}x{pp}.jsonl")
            r = run_ftx(["eval-lambada", "-m", os.path.join(FIX, "gpt2_bpe", f"{tp}-gpu"), "--max-examples", "40",
                         "--batch-size", "8", "--output", out, "--force", "--quiet"], tp, pp)
            if not check(r.returncode == 0, f"eval-lambada {tp}x{pp}: exit {r.returncode}: {r.stderr.strip()[-800:]}"):
                return
            with open(out) as f:
                res[(tp, pp)] = [json.loads(l) for l in f]
        check(len(res[(1, 1)]) == 40, f"eval-lambada: {len(res[(1, 1)])} results, expected 40")
        ok = close(res[(2, 2)], res[(1, 1)], "eval-lambada 2x2")
        print(f"eval-lambada TP 2 x PP 2: {'same per-example results as one rank' if ok else 'DIFFERENT'}")


def test_errors():
    def expect(name, np, args, needle):
        cmd = mpirun(np) + [FTX, *args]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            check(False, f"{name}: hung (no exit within 120 s)")
            return
        lines = [l for l in r.stderr.splitlines() if l.startswith("ftx: error:")]
        check(r.returncode != 0, f"{name}: exit code 0")
        check(len(lines) == np, f"{name}: {len(lines)} error lines from {np} ranks: {r.stderr.strip()[-600:]}")
        check(all(needle in l for l in lines), f"{name}: expected '{needle}' in {lines}")
        print(f"{name}: {lines[0] if lines else r.stderr.strip()}")

    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(FIX, "gpt2", "1-gpu")
        gen = ["generate", "-m", model, "--input-ids", os.path.join(FIX, "gpt2", "start_ids.csv"),
               "--max-new-tokens", "2", "--output", os.path.join(tmp, "o.jsonl")]
        expect("3 ranks for TP 1 x PP 2", 3, gen + ["--tensor-para-size", "1", "--pipeline-para-size", "2"],
               "--tensor-para-size 1 x --pipeline-para-size 2 needs 2 ranks, but this run has 3")
        expect("3 ranks for PP 2", 3, gen + ["--pipeline-para-size", "2"], "needs")
        expect("PP 5 > 4 layers", 5, gen + ["--tensor-para-size", "1", "--pipeline-para-size", "5"],
               "--pipeline-para-size 5 is more than the model's 4 layers")
        gen2 = ["generate", "-m", os.path.join(FIX, "gpt2", "2-gpu")] + gen[3:]
        expect("2-gpu folder at TP 1 x PP 2", 2, gen2 + ["--pipeline-para-size", "2"],
               "model folder was converted for tensor parallel size 2")
        lam = ["eval-lambada", "-m", os.path.join(FIX, "gpt2_bpe", "1-gpu"), "--max-examples", "2"]
        expect("eval-lambada: 2 ranks for TP 2 x PP 2", 2, lam + ["--tensor-para-size", "2", "--pipeline-para-size", "2"],
               "needs 4 ranks, but this run has 2")


def test_cuda():
    try:
        gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
    except OSError:
        gpus = 0
    linked = subprocess.run(["ldd", FTX], capture_output=True, text=True).stdout
    if "libcudart" not in linked:
        print("SKIP: ftx was built without CUDA")
        sys.exit(77)
    if gpus < 2:
        print(f"SKIP: pipeline parallelism on CUDA needs one GPU per rank: 2 ranks, {gpus} GPU(s) here")
        sys.exit(77)
    global TOL
    csv = ["--input-ids", os.path.join(FIX, "gpt2", "start_ids.csv")]
    with tempfile.TemporaryDirectory() as tmp:
        base = generate(tmp, "gpt2", 1, 1, "cpu", csv, ["--return-log-probs"])
        for tp, pp in ((1, 2), (2, 1)):
            got = generate(tmp, "gpt2", tp, pp, f"cuda_{tp}x{pp}", csv,
                           ["--return-log-probs", "--device", "cuda", "--dtype", "fp32"])
            if got is None or base is None:
                continue
            TOL = 1e-3
            ok = close(got[0], base[0], f"cuda {tp}x{pp}")
            print(f"gpt2 CUDA TP {tp} x PP {pp}: {'same as one CPU rank' if ok else 'DIFFERENT'}")


def main():
    part = sys.argv[1]
    if part == "generate":
        test_generate(sys.argv[2])
    elif part == "lambada":
        test_lambada()
    elif part == "errors":
        test_errors()
    elif part == "cuda":
        test_cuda()
    else:
        sys.exit(f"unknown part {part}")
    finish("pp e2e")


if __name__ == "__main__":
    main()
