"""What the emulations that follow an engine's rounding share (w8a8_follow.py, fp8_follow.py): reading
an engine trace, and running the float64 emulation along the engine's greedy paths.

A trace folder holds, per TP rank R, index.R.json ({"calls": [{..., "rows", "cols", "offset"}]}, in
call order: each prompt's prefill, then its decode steps) and data.R.bin (the traced fp32 values,
offsets in elements).
"""
import contextlib
import json
import os
import sys

import numpy as np

import gpt_reference as ref


def load_trace(folder, rank, key):
    """{key(call): the rows of its calls in order, concatenated} of rank `rank`."""
    with open(os.path.join(folder, f"index.{rank}.json")) as f:
        calls = json.load(f)["calls"]
    data = np.fromfile(os.path.join(folder, f"data.{rank}.bin"), np.float32)
    parts = {}
    for c in calls:
        n = c["rows"] * c["cols"]
        if c["offset"] + n > data.size:
            sys.exit(f"{folder}/index.{rank}.json: call {c} reaches past data.{rank}.bin ({data.size} values)")
        parts.setdefault(key(c), []).append(data[c["offset"]:c["offset"] + n].reshape(c["rows"], c["cols"]))
    return {k: np.concatenate(v) for k, v in parts.items()}


def finish(out_path, logits, follower, summary, largest):
    """Prints `summary` and the follower's failures, writes {"greedy_logits", "compared", "followed",
    "largest"} to out_path and exits (1 when a value was off)."""
    print(summary)
    for msg in follower.failures:
        print("FAIL:", msg)
    with open(out_path, "w") as f:
        json.dump({"greedy_logits": logits, "compared": follower.compared, "followed": follower.followed,
                   "largest": largest}, f)
    sys.exit(1 if follower.failures else 0)


def greedy_path_logits(cfg, W, prompts, greedy, follower, **kw):
    """Each prompt's last-position logits at every step of its greedy path (the tokens the engine was
    fed), [prompt][step][V]. Before each forward, follower.prompt is the prompt's index and
    follower.seen the positions earlier steps already covered (the follower counts only new ones)."""
    out = []
    for b, prompt in enumerate(prompts):
        follower.prompt, seq, steps = b, list(prompt), []
        for tok in greedy[b]:
            follower.seen = 0 if not steps else len(seq) - 1
            steps.append(ref.forward(cfg, W, seq, **kw)[-1].tolist())
            seq.append(tok)
        out.append(steps)
    return out


@contextlib.contextmanager
def quantised_linears(wrap, gemm_class, follow):
    """For the length of the block, gpt_reference's linears are wrap(ref._lin) and their GEMMs
    (gemm_class) report to `follow`; wrap None leaves the linears alone."""
    orig = ref._lin
    if wrap:
        ref._lin = wrap(orig)
        gemm_class.follow = follow
    try:
        yield
    finally:
        ref._lin = orig
        gemm_class.follow = None
