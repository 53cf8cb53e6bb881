"""A float64 forward of a Megatron-DeepSpeed MoE GPT read from its DeepSpeed checkpoint folder
(mp_rank_XX_model_states.pt and layer_n_expert_e_mp_rank_XX_model_states.pt, checkpoint_version 3),
from the published formulas, for ftx's engine on FT's GPT-MoE layout (tests/e2e/convert/moe_test.py).

The model: learned positions, pre-LayerNorm blocks, erf GELU (Megatron's F.gelu; openai_gelu is
not used by the fixtures), attention scaled by 1/sqrt(head_dim), logits against the word
embeddings. A MoE layer (one with a deepspeed_moe gate) replaces the FFN by DeepSpeed's TopKGate and
its experts (deepspeed/moe/sharded_moe.py, deepspeed/moe/experts.py):
  p = softmax(x · wgᵀ) over the experts;
  top-1 (top1gating): the argmax expert, weighted by p as it is;
  top-2 (top2gating): the two largest, each weighted by p / (p₁ + p₂);
  out = Σ weight · (W2 gelu(W1 x + b1) + b2)  (Megatron-DeepSpeed's expert MLP adds its output
  bias itself: its dense_4h_to_h does not skip it, so DeepSpeed's Experts keep it in out[0]).
What only training does is left out, as FasterTransformer's GPT-MoE leaves it out: the Gumbel noise
on the second choice, input jitter, and the capacity that drops tokens beyond it (the reference
routes every token).
"""
import glob
import os

import torch


def _cat(parts, dim):
    return torch.cat(parts, dim=dim) if len(parts) > 1 else parts[0]


def load(folder):
    """Full float64 weights and the args of a DeepSpeed tag folder."""
    ranks = sorted(glob.glob(os.path.join(folder, "mp_rank_*_model_states.pt")))
    cks = [torch.load(p, map_location="cpu") for p in ranks]
    args = cks[0]["args"]
    lms = [(c.get("module") or c["model"])["language_model"] for c in cks]
    enc = [lm["encoder"] for lm in lms]
    w = {"wte": _cat([lm["embedding"]["word_embeddings"]["weight"] for lm in lms], 0),
         "wpe": lms[0]["embedding"]["position_embeddings"]["weight"]}
    for k in enc[0]:
        if "query_key_value" in k or "dense_h_to_4h" in k:
            w[k] = _cat([e[k] for e in enc], 0)  # column-parallel: output rows
        elif k.endswith("self_attention.dense.weight") or k.endswith("mlp.dense_4h_to_h.weight"):
            w[k] = _cat([e[k] for e in enc], 1)  # row-parallel: input columns
        else:
            w[k] = enc[0][k]
    moe = sorted(int(k.split(".")[1]) for k in enc[0] if k.endswith("deepspeed_moe.gate.wg.weight"))
    experts = {}
    for n, l in enumerate(moe):
        for f in sorted(glob.glob(os.path.join(folder, f"layer_{n}_expert_*_mp_rank_00_model_states.pt"))):
            sd = torch.load(f, map_location="cpu")
            e = int(os.path.basename(f).split("_")[3])
            experts[(l, e)] = {k.split(".deepspeed_experts.")[1].split(".", 1)[1]: v for k, v in sd.items()}
    w = {k: v.double() for k, v in w.items()}
    experts = {k: {n: v.double() for n, v in x.items()} for k, x in experts.items()}
    return args, w, moe, experts


def forward(args, w, moe, experts, ids):
    """Logits [len(ids), V] of one sequence."""
    H, N = args.hidden_size, args.num_attention_heads
    d, eps, topk = H // N, args.layernorm_epsilon, args.topk
    gelu = torch.nn.functional.gelu
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (H,), w[p + ".weight"], w[p + ".bias"], eps)  # noqa: E731
    S = len(ids)
    x = w["wte"][ids] + w["wpe"][:S]
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
    for l in range(args.num_layers):
        p = f"layers.{l}."
        y = ln(x, p + "input_layernorm")
        qkv = y @ w[p + "self_attention.query_key_value.weight"].T + w[p + "self_attention.query_key_value.bias"]
        qkv = qkv.view(S, N, 3, d)  # checkpoint_version 3: [heads, 3, head_dim]
        q, k, v = qkv[:, :, 0].transpose(0, 1), qkv[:, :, 1].transpose(0, 1), qkv[:, :, 2].transpose(0, 1)
        s = (q @ k.transpose(1, 2)) / d ** 0.5
        a = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
        a = a.transpose(0, 1).reshape(S, H)
        x = x + a @ w[p + "self_attention.dense.weight"].T + w[p + "self_attention.dense.bias"]
        y = ln(x, p + "post_attention_layernorm")
        if l in moe:
            prob = torch.softmax(y @ w[p + "mlp.deepspeed_moe.gate.wg.weight"].T, -1)
            top, idx = torch.topk(prob, topk, -1)
            if topk == 2:
                top = top / top.sum(-1, keepdim=True)
            out = torch.zeros_like(x)
            for t in range(S):
                for j in range(topk):
                    ex = experts[(l, int(idx[t, j]))]
                    h = gelu(y[t] @ ex["dense_h_to_4h.weight"].T + ex["dense_h_to_4h.bias"])
                    out[t] += top[t, j] * (h @ ex["dense_4h_to_h.weight"].T + ex["dense_4h_to_h.bias"])
            x = x + out
        else:
            h = gelu(y @ w[p + "mlp.dense_h_to_4h.weight"].T + w[p + "mlp.dense_h_to_4h.bias"])
            x = x + h @ w[p + "mlp.dense_4h_to_h.weight"].T + w[p + "mlp.dense_4h_to_h.bias"]
    x = torch.nn.functional.layer_norm(x, (H,), w["final_layernorm.weight"], w["final_layernorm.bias"], eps)
    return x @ w["wte"].T


def expected(folder, prompts, steps):
    """expected.json of tests/unit/convert_arch_test.cc's ArchEngine.LogitsMatchReference: the
    greedy path of each prompt and the logits of every step."""
    args, w, moe, experts = load(folder)
    greedy, greedy_logits = [], []
    for prompt in prompts:
        ids, toks, rows = list(prompt), [], []
        for _ in range(steps):
            row = forward(args, w, moe, experts, ids)[-1]
            rows.append([float(v) for v in row])
            toks.append(int(torch.argmax(row)))
            ids.append(toks[-1])
        greedy.append(toks)
        greedy_logits.append(rows)
    return dict(prompts=prompts, greedy=greedy, prompt_logits=[r[0] for r in greedy_logits],
                greedy_logits=greedy_logits, vocab_size=int(w["wte"].shape[0]), end_id=-1)
