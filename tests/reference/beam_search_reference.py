#!/usr/bin/env python3
"""Independent float64 reference for ftx's beam search, written from FasterTransformer's definition
(OnlineBeamSearchLayer; docs/runtime.md#beam-search), not from ftx's code.

Input (JSON, argv[1]): {"cases": [case...]}, each case {"vocab": V, "beam_width": K, "prompt_len": P, "max_new_tokens": N,
  "end_id": E, "len_penalty": lp, "diversity_rate": d, "logits": [step][row][V]}
Output (JSON, argv[2]): {"cases": [result...]}, each result {"steps": [{"tokens": [K], "parents": [K]}...],
  "beams": [{"output_ids": [...], "cum_log_prob": c, "output_log_probs": [...]}] best first}

FT semantics reproduced:
- cum log probs start at 0 for beam 0 and -FLT_MAX for the others (beams share the prompt);
- a live beam proposes its 2K best tokens by log-softmax, value = parent cum + log prob;
  a finished beam proposes only end_id at log prob 0;
- FT's sequence_length counter starts at P - 1 and grows by one per token of a live beam (end_id
  included); a candidate's penalty length is counter + 1 for a live parent, counter for a finished one;
- score = value / len^lp (unchanged if lp == 0 or len == 1) + d * (candidate index mod K), the
  index running over the request's [beam][2K] candidate buffer; the K best scores win, in order;
- a beam finishes on end_id or after N generated tokens; results are sorted by the penalised score.
"""
import json
import sys

import torch

FLT_MAX = 3.4028234663852886e38


def penalised(cum, length, lp):
    if lp == 0.0 or length == 1:
        return cum
    return cum / (float(length) ** lp)


def decode(cfg):
    V, K, P = cfg["vocab"], cfg["beam_width"], cfg["prompt_len"]
    N, E = cfg["max_new_tokens"], cfg["end_id"]
    lp, d = cfg["len_penalty"], cfg["diversity_rate"]
    logits = torch.tensor(cfg["logits"], dtype=torch.float32).to(torch.float64)

    beams = [{"ids": [], "cum": 0.0 if k == 0 else -FLT_MAX, "lps": [], "finished": N == 0,
              "counter": P - 1, "score": 0.0 if k == 0 else -FLT_MAX} for k in range(K)]
    steps = []
    for step in range(logits.shape[0]):
        if all(b["finished"] for b in beams):
            break
        cands = []  # (key, index, parent, token, step_lp, cum, score)
        for k, b in enumerate(beams):
            if b["finished"]:
                length = b["counter"]
                score = penalised(b["cum"], length, lp)
                cands.append((score, k * 2 * K, k, E, 0.0, b["cum"], score))
                continue
            length = b["counter"] + 1
            logp = torch.log_softmax(logits[step, k], dim=-1)
            n = min(2 * K, V)
            # Descending by log prob, lower id first on ties (a stable sort of the negated values).
            order = sorted(range(V), key=lambda i: (-logp[i].item(), i))[:n]
            for r, tok in enumerate(order):
                cum = b["cum"] + logp[tok].item()
                score = penalised(cum, length, lp)
                index = k * 2 * K + r
                cands.append((score + d * (index % K), index, k, tok, logp[tok].item(), cum, score))
        cands.sort(key=lambda c: (-c[0], c[1]))
        new = []
        for c in cands[:K]:
            _, _, parent, tok, step_lp, cum, score = c
            pb = beams[parent]
            nb = {"ids": list(pb["ids"]), "cum": pb["cum"], "lps": list(pb["lps"]),
                  "finished": pb["finished"], "counter": pb["counter"], "score": score}
            if not pb["finished"]:
                nb["ids"].append(tok)
                nb["lps"].append(step_lp)
                nb["cum"] = cum
                nb["counter"] += 1
                nb["finished"] = tok == E or len(nb["ids"]) >= N
            new.append(nb)
        steps.append({"tokens": [c[3] for c in cands[:K]], "parents": [c[2] for c in cands[:K]]})
        beams = new

    ranked = sorted(range(K), key=lambda k: (-beams[k]["score"], k))
    return {"steps": steps,
            "beams": [{"output_ids": beams[k]["ids"], "cum_log_prob": beams[k]["cum"],
                       "output_log_probs": beams[k]["lps"]} for k in ranked]}


def main():
    cases = json.load(open(sys.argv[1]))["cases"]
    json.dump({"cases": [decode(c) for c in cases]}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
