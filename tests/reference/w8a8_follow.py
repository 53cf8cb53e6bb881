#!/usr/bin/python3
"""The float64 W8A8 emulation (int8_reference.w8a8_model) along an engine run's greedy paths,
following the engine's rounding of activations where the two round differently.

An fp32 engine and a float64 emulation of the same quantised arithmetic compute each activation
with different rounding errors. Where an unrounded value x·scale lies that close to a rounding
boundary (k + 0.5), the two round it to neighbouring int8 values, and the difference then moves
the logits by far more than the fp32 error. So the emulation takes, for every activation it
quantises, the value the engine computed (the engine's fp32 GEMM inputs, traced by
tests/unit/engine_w8a8_test.cc), and:
  - asserts that the engine's unrounded value lies within TOL of its own v
    (everywhere: this is a check of every activation, not only near boundaries);
  - uses the engine's rounded value where it differs from its own (possible only within that
    distance of a boundary) and counts it.
Everything else (weights, scales, dequantisation, the rest of the model) stays the emulation's own.

Usage: w8a8_follow.py --model NAME --folder TP1_FOLDER --mode per_tensor|per_token_channel --tp N
                      --expected EXPECTED_JSON --trace DIR --out OUT_JSON
DIR holds, per TP rank R, index.R.json ({"calls": [{"prompt", "step", "gemm", "rows", "cols",
"offset"}]}, in call order) and data.R.bin (the inputs, fp32, offsets in elements). OUT_JSON:
{"greedy_logits": [prompt][step][V], "compared", "followed", "largest"}. Exit 1 on a check failure.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import int8_reference  # noqa: E402
from follow_util import finish, greedy_path_logits, load_trace, quantised_linears  # noqa: E402

# fp32 against float64 activations, in units of the quantisation step (1): measured up to 3e-5
# per tensor and 1.0e-4 per token (amax/127 scales the row up) on the fixture models. A wrong
# activation would be off by a good part of a step.
TOL = 1e-3


def engine_rounding(a, act_scale):
    """The engine's quantisation of fp32 rows `a` (lib/ops/backend.h, W8A8): (q, unrounded v)."""
    if act_scale is None:
        amax = np.abs(a).max(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = a * (np.float32(127.0) / amax)
        v = np.where(amax > 0, v, np.float32(0))
    else:
        v = a * np.float32(act_scale)
    return np.clip(np.rint(v), -128, 127), v


class Follower:
    def __init__(self, traces):
        self.traces = traces
        self.prompt, self.seen = 0, 0
        self.counted = set()
        self.compared = self.followed = 0
        self.max_diff = 0.0
        self.failures = []

    def __call__(self, gemm, part, v, qx):
        rank = part if gemm.tp > 1 else 0
        key = (self.prompt, gemm.name)
        if key not in self.traces[rank]:
            sys.exit(f"rank {rank}: no traced input for prompt {self.prompt} GEMM {gemm.name}")
        a = self.traces[rank][key]
        n = v.shape[0]
        if a.shape[0] < n or a.shape[1] != v.shape[1]:
            sys.exit(f"rank {rank}, prompt {self.prompt}, {gemm.name}: traced {a.shape}, emulation needs {tuple(v.shape)}")
        q_eng, v_eng = engine_rounding(a[:n], gemm.act_scale)
        v64, q64 = v.numpy(), qx.numpy()
        diff = np.abs(v_eng.astype(np.float64) - v64)
        differ = q_eng != q64
        # Each step recomputes the whole sequence: count the positions this step adds, once per
        # GEMM input (Q, K and V share theirs).
        tag = (self.prompt, self.seen, gemm.name, part)
        if tag not in self.counted:
            self.counted.add(tag)
            self.compared += int(diff[self.seen:].size)
            self.followed += int(differ[self.seen:].sum())
            self.max_diff = max(self.max_diff, float(diff[self.seen:].max(initial=0.0)))
            bad = diff > TOL
            bad[:self.seen] = False
            if bad.any() and len(self.failures) < 10:
                r, c = map(int, np.argwhere(bad)[0])
                self.failures.append(f"prompt {self.prompt} position {r} {gemm.name} (part {part}) column {c}: "
                                     f"engine x·scale {float(v_eng[r, c])!r}, emulation {float(v64[r, c])!r} "
                                     f"({int(bad.sum())} such values in this call)")
        return torch.from_numpy(np.where(differ, q_eng, q64).astype(np.float64))


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--model", "--folder", "--mode", "--expected", "--trace", "--out"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--tp", type=int, required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with open(args.expected) as f:
        fix = json.load(f)
    greedy = fix[args.mode][f"tp{args.tp}"]["greedy"]
    per_token = per_channel = args.mode == "per_token_channel"
    W = int8_reference.w8a8_model(args.folder, args.tp, per_token, per_channel)
    cfg = fix["ref_cfg"]  # the float64 reference's model description, as the fixture made it
    follower = Follower([load_trace(args.trace, r, lambda c: (c["prompt"], c["gemm"])) for r in range(args.tp)])
    with quantised_linears(int8_reference.w8a8_linear, int8_reference.W8A8Gemm, follower):
        out = greedy_path_logits(cfg, W, fix["prompts"], greedy, follower)
    finish(args.out, out, follower, f"  {args.model} {args.mode} TP {args.tp}: {follower.compared} activations "
           f"compared with the engine's (largest |diff| {follower.max_diff:.2e} steps), {follower.followed} rounded "
           f"its way", follower.max_diff)


if __name__ == "__main__":
    main()
