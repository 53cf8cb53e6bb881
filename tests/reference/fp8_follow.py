#!/usr/bin/env python3
"""The float64 FP8 emulation (fp8_reference.py) along an engine run's greedy paths, following the
engine's E4M3 rounding where the two round a value differently.

The fp32 engine and the float64 emulation compute every activation, K and V with different rounding
errors; where a value lies that close to an E4M3 rounding boundary they round it to neighbouring
codes (a step of 1/8 to 1/16 of the value), which moves the logits far beyond the fp32 error. So
for every value it quantises the emulation takes the value the engine had (its fp32 GEMM inputs and
the K and V rows it stored, traced by tests/unit/engine_fp8_test.cc) and
  - checks that the engine's unrounded value (x · fp32(1/s) in fp32) lies within TOL quantisation
    steps of its own (everywhere: every value is checked, not only those near a boundary), a step
    counted as no less than the step at 1.0 (2^-3): the fp32 error of a value follows the size of
    the terms it was summed from, which the per-tensor scale puts near 448, not its own size (a value
    near 0 comes from cancelling terms);
  - uses the engine's code where it differs from its own (possible only that close to a boundary)
    and counts it.
Weights, scales and everything else stay the emulation's own.

Usage: fp8_follow.py --folder TP1_FOLDER --model NAME --mode fp8|fp8_kv|fp8_both --tp N
                     --expected EXPECTED_JSON --trace DIR --out OUT_JSON
DIR holds per TP rank R index.R.json ({"calls": [{"prompt", "kind" ("gemm" | "k" | "v"), "name" (a GEMM
"L.qkv" / "L.dense" / "L.fc1" / "L.fc2", or a layer), "rows", "cols", "offset"}]}, in call order) and
data.R.bin (fp32). OUT_JSON: {"greedy_logits": [prompt][step][V], "compared", "followed",
"largest" (steps)}. Exit 1 on a failed check.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fp8_reference as f8  # noqa: E402
from follow_util import finish, greedy_path_logits, load_trace, quantised_linears  # noqa: E402

# fp32 against float64 values, in E4M3 quantisation steps of at least 2^-3: the fixture models
# measure up to 5e-4. A wrong value would be off by a good part of a step.
TOL = 2e-3
FLOOR = 2.0 ** -3
ROW_PARALLEL = ("dense", "fc2")  # input rows (columns of A) split over the TP ranks


class Follower:
    def __init__(self, traces):
        self.traces = traces  # per rank
        self.prompt, self.seen = 0, 0
        self.counted = set()
        self.compared = self.followed = 0
        self.max_steps = 0.0
        self.failures = []

    def engine_rows(self, kind, name, split_axis):
        """The engine's traced values for the current prompt, the ranks' parts joined on split_axis
        (None: every rank holds the whole, rank 0's is taken)."""
        key = (self.prompt, kind, name)
        for r, t in enumerate(self.traces):
            if key not in t:
                sys.exit(f"rank {r}: no traced {kind} for prompt {self.prompt} {name}")
        if split_axis is None:
            return self.traces[0][key]
        return np.concatenate([t[key] for t in self.traces], axis=split_axis)

    def follow(self, label, a, inv, v, q):
        """a: the engine's fp32 values (rows >= those of v), inv: fp32(1/s); v, q: the emulation's
        unrounded values and E4M3 values (torch float64, same shape as a[:len(v)]). Returns q with
        the engine's codes where they differ."""
        n = v.shape[0]
        if a.shape[0] < n or a[:n].size != v.numel():
            sys.exit(f"prompt {self.prompt} {label}: traced {a.shape}, the emulation needs {tuple(v.shape)}")
        v_eng = (a[:n] * np.float32(inv)).astype(np.float32).reshape(v.shape)
        q_eng = f8.e4m3_values(v_eng)
        v64, q64 = v.numpy(), q.numpy()
        steps = np.abs(v_eng.astype(np.float64) - v64) / np.maximum(f8.step_of(v64), FLOOR)
        differ = q_eng != q64
        tag = (self.prompt, self.seen, label)
        if tag not in self.counted:  # each step recomputes the sequence: count the new positions once
            self.counted.add(tag)
            new = (slice(self.seen, None),)
            self.compared += int(steps[new].size)
            self.followed += int(differ[new].sum())
            self.max_steps = max(self.max_steps, float(steps[new].max(initial=0.0)))
            bad = steps > TOL
            bad[:self.seen] = False
            if bad.any() and len(self.failures) < 10:
                at = tuple(int(i) for i in np.argwhere(bad)[0])
                self.failures.append(f"prompt {self.prompt} {label} at {at}: engine x/s {float(v_eng[at])!r}, "
                                     f"emulation {float(v64[at])!r} ({int(bad.sum())} such values)")
        return torch.from_numpy(np.where(differ, q_eng, q64))

    def gemm(self, g, v, q):
        short = g.name.split(".")[1]
        a = self.engine_rows("gemm", g.name, 1 if short in ROW_PARALLEL else None)
        return self.follow(g.name, a, np.float32(g.inv), v, q)

    def kv(self, store, replicated):
        """replicated: every rank holds the one K/V head (multi-query), else the ranks' heads side by side
        (multi-head and grouped-query attention)."""
        def hook(layer, which, v, q):
            s = store.scales[layer]
            a = self.engine_rows(which, str(layer), None if replicated else 1)  # [rows, kv_heads · d]
            return self.follow(f"layer {layer} {which.upper()}", a, np.float32(1.0) / s, v, q)
        return hook


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--folder", "--model", "--mode", "--expected", "--trace", "--out"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--tp", type=int, required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with open(args.expected) as f:
        fix = json.load(f)
    greedy = fix[args.mode]["greedy"]
    cfg = fix["ref_cfg"]  # the float64 reference's model description, as the fixture made it
    weights = args.mode in ("fp8", "fp8_both")
    trace_key = lambda c: (c["prompt"], c["kind"], str(c["name"]))  # noqa: E731
    follower = Follower([load_trace(args.trace, r, trace_key) for r in range(args.tp)])
    W = f8.fp8_model(args.folder) if weights else f8.float_model(args.folder)
    kw = {}
    if args.mode in ("fp8_kv", "fp8_both"):
        store = f8.Fp8KvStore(args.folder, len(W["layers"]))
        store.follow = follower.kv(store, cfg["kv_heads"] == 1 < cfg["heads"])
        kw["kv_store"] = store
    with quantised_linears(f8.fp8_linear if weights else None, f8.Fp8Gemm, follower.gemm):
        out = greedy_path_logits(cfg, W, fix["prompts"], greedy, follower, **kw)
    finish(args.out, out, follower, f"  {args.model} {args.mode} TP {args.tp}: {follower.compared} values compared "
           f"with the engine's (largest difference {follower.max_steps:.2e} steps), {follower.followed} rounded its "
           f"way", follower.max_steps)


if __name__ == "__main__":
    main()
