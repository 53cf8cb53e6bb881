"""Float64 reference forward for the GPT-family models ftx's engine runs.

Written from the models' definitions (GPT-2, Megatron GPT, GPT-J, GPT-NeoX, BLOOM, OPT, NeMo
GPT-Next, SantaCoder/StarCoder), not from ftx's code: a full causal forward over the whole sequence
with no KV cache, on logical (unsplit) weights in their natural orientation:

  wte [V,H], wpe [P,H] or None, lm_head [V,H] or None (tied), lm_head_bias [V] or None,
  pre_ln / final_ln: (gamma, beta) or None,
  layers[i]: ln1, ln2 (gamma, beta) or None; wq [H, nh*d], wk/wv [H, kvh*d], bq/bk/bv or None,
             wo [nh*d, H] (nh*d need not be H: Qwen3, Gemma), bo; w1 [H,I], b1; wg [H,I], bg (gated
             FFN) or None; w2 [I,H], b2.

cfg keys: heads, kv_heads, head_dim, eps, norm ('pre'|'post'), parallel_residual, shared_input_norm,
activation ('gelu'|'gelu_tanh'|'relu'|'silu'|'swiglu'|'geglu'|'geglu_tanh'), position ('learned'|'rope'|'alibi'|
'none'|'sinusoidal'), rotary_dim, rotary_style ('interleaved'|'half_split'), rotary_base, embedding_scale,
position_offset (learned: wpe row = position + offset, OPT's 2; sinusoidal: the fairseq/XGLM table
row, offset 2 there).
Optional cfg keys of the Llama family: normalization 'rmsnorm' (every norm is x / sqrt(mean(x²) + eps)
· gamma, LlamaRMSNorm; the norms' beta is None), rope_scaling None or {"type": "linear", "factor"} (every
frequency / factor) or {"type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
"original_max_position_embeddings"} (Llama 3.1's frequencies, below) or {"type": "longrope", "short_factor",
"attention_factor"} (Phi-3: frequency i / short_factor[i], cos and sin times attention_factor; the caller
keeps sequences within original_max_position_embeddings, where short_factor holds). Optional layer entries q_norm,
k_norm [head_dim] (Qwen3): RMSNorm gammas over each head of q and k after the projections, before rotary.
Optional keys of Gemma 2 / 3 (their norms' (1 + w) is the caller's: the gammas come with the 1 added):
cfg attention_scale (the factor of q·k in place of 1/sqrt(head_dim)), attention_softcap and
final_logit_softcap (cap·tanh(x/cap) of the scaled scores before the mask, and of the logits),
layer_windows (one per layer: w > 0 attends to the last w positions, 0 to all), rotary_base_local
(the windowed layers rotate with it, unscaled); layer entries post_attn_ln and post_ffn_ln (the norms
of the attention's and the FFN's outputs before the residual add).
Optional cfg key gemm: a function (x, w, kind) -> x @ w used for every product with a weight matrix,
kind 'layer' (QKV, attention output, FFN), 'head' (lm_head) or 'project' (OPT's projections); an
emulation of reduced-precision GEMMs rounds x there (tests/reference/half_reference.py).
Optional W entries: project_in [E, H] (OPT: embeddings of width E projected to H before positions
are added), project_out [H, E] (OPT: applied after the final layernorm, before lm_head [V, E]).
"""
import math

import torch
import torch.nn.functional as F


def norm(x, p, eps, kind="layernorm"):
    g, b = p
    if kind == "rmsnorm":
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g
    return F.layer_norm(x, (x.shape[-1],), g, b, eps)


def _act(name, x):
    if name in ("gelu", "geglu"):
        return F.gelu(x)  # exact erf GELU
    if name in ("gelu_tanh", "geglu_tanh"):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return torch.relu(x)
    if name in ("silu", "swiglu"):
        return x * torch.sigmoid(x)
    raise ValueError(name)


def alibi_slopes(n):
    """BLOOM's slopes: geometric sequence for the largest power of two <= n, then every other
    slope of the sequence for twice that power (HF build_alibi_tensor)."""
    def pow2_slopes(m):
        start = 2.0 ** (-(2.0 ** -(math.log2(m) - 3)))
        return [start * start ** i for i in range(m)]
    p = 2 ** int(math.floor(math.log2(n)))
    slopes = pow2_slopes(p)
    if p < n:
        slopes += pow2_slopes(2 * p)[0::2][: n - p]
    return torch.tensor(slopes, dtype=torch.float64)


def inv_freq(rot, base, scaling=None):
    """The rot/2 rotary frequencies base^(-2i/rot), scaled as `scaling` says. llama3 (Meta's
    apply_scaling for Llama 3.1): with L = original_max_position_embeddings and the wavelength
    w = 2π/f of each frequency f: f/factor where w > L/low_freq_factor, f where w < L/high_freq_factor,
    else (1 - t)·f/factor + t·f with t = (L/w - low_freq_factor) / (high_freq_factor - low_freq_factor)."""
    f = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    if not scaling:
        return f
    if scaling["type"] == "linear":
        return f / scaling["factor"]
    if scaling["type"] == "longrope":
        return f / torch.tensor(scaling["short_factor"], dtype=torch.float64)
    assert scaling["type"] == "llama3", scaling
    k, lo, hi, L = (scaling[n] for n in ("factor", "low_freq_factor", "high_freq_factor",
                                         "original_max_position_embeddings"))
    w = 2 * math.pi / f
    t = (L / w - lo) / (hi - lo)
    mid = (1 - t) * f / k + t * f
    return torch.where(w > L / lo, f / k, torch.where(w < L / hi, f, mid))


def _rotary(x, pos, rot, style, base, scaling=None):
    """x [S, heads, d]; rotates the first `rot` dims of each head by pos · inv_freq(rot, base, scaling)."""
    inv = inv_freq(rot, base, scaling)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]          # [S, rot/2]
    m = scaling.get("attention_factor", 1.0) if scaling else 1.0  # longrope: the rotated dims grow by it
    cos, sin = m * torch.cos(ang)[:, None, :], m * torch.sin(ang)[:, None, :]
    xr, rest = x[..., :rot], x[..., rot:]
    if style == "half_split":   # GPT-NeoX: (i, i + rot/2)
        a, b = xr[..., : rot // 2], xr[..., rot // 2:]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    else:                       # GPT-J: (2i, 2i+1)
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    return torch.cat([out, rest], dim=-1)


def sinusoidal(positions, H):
    """fairseq SinusoidalPositionalEmbedding / HF XGLMSinusoidalPositionalEmbedding.get_embedding:
    [sin(p·f_i) for i < H/2 | cos(p·f_i) | 0 when H is odd], f_i = exp(-i·ln(10000)/(H/2 - 1))."""
    half = H // 2
    f = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    a = positions.to(torch.float64)[:, None] * f[None, :]
    e = torch.cat([torch.sin(a), torch.cos(a)], dim=1)
    if H % 2:
        e = torch.cat([e, torch.zeros(e.shape[0], 1, dtype=torch.float64)], dim=1)
    return e


def _matmul(x, w, kind):
    return x @ w


def _lin(x, w, b):
    y = x @ w
    return y + b if b is not None else y


def forward(cfg, W, ids, window=0, embeds=None, prefix=None, kv_store=None):
    """Logits [S, V] (float64) of every position of `ids`. window > 0: each position attends only to
    the last `window` positions up to itself (FT's memory_len: a circular KV cache), in every layer;
    positions keep their absolute values. embeds: {position: [H] tensor} token embeddings used
    instead of wte rows at those positions (prompt learning's virtual tokens; ids there are
    ignored), before the scale and the position term. prefix: per layer (K, V), each [P, kv_heads, d]:
    keys and values every position attends to ahead of the sequence's own (FT's prefix prompts;
    taken as stored, no rotary), while the sequence's positions still start at 0. kv_store:
    f(layer, t) -> t', applied to the keys and to the values [S, kv_heads, d] of every layer (after
    rotary) as a KV cache would store and return them (an INT8 cache: int8_kv_reference.py)."""
    S = len(ids)
    mm = cfg.get("gemm") or _matmul

    def lin(x, w, b):
        if cfg.get("gemm") is None:
            return _lin(x, w, b)  # looked up at call time: tests may wrap it to observe the GEMMs
        y = mm(x, w, "layer")
        return y + b if b is not None else y
    ids = torch.tensor([0 if embeds and t in embeds else v for t, v in enumerate(ids)], dtype=torch.long)
    nh, kvh, d = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    eps = cfg["eps"]
    kind = cfg.get("normalization", "layernorm")

    def _ln(x, p, eps):
        return norm(x, p, eps, kind)
    pos = torch.arange(S)
    x = W["wte"][ids].clone()
    for t, e in (embeds or {}).items():
        x[t] = e
    x = x * cfg.get("embedding_scale", 1.0)
    if W.get("project_in") is not None:
        x = mm(x, W["project_in"], "project")
    off = cfg.get("position_offset", 0)
    if cfg["position"] == "learned":
        x = x + W["wpe"][pos + off]
    elif cfg["position"] == "sinusoidal":
        x = x + sinusoidal(pos + off, x.shape[-1])
    if W.get("pre_ln") is not None:
        x = _ln(x, W["pre_ln"], eps)
    causal = torch.tril(torch.ones(S, S, dtype=torch.bool))
    if window > 0:
        causal &= (pos[:, None] - pos[None, :]) < window
    rel = (pos[None, :] - pos[:, None]).to(torch.float64)        # k_pos - q_pos
    slopes = alibi_slopes(nh) if cfg["position"] == "alibi" else None

    def attention(h, L, li, pre=None):
        q = lin(h, L["wq"], L["bq"]).view(S, nh, d)
        k = lin(h, L["wk"], L["bk"]).view(S, kvh, d)
        v = lin(h, L["wv"], L["bv"]).view(S, kvh, d)
        if L.get("q_norm") is not None:  # Qwen3: RMSNorm over each head of q and of k, before rotary
            q = norm(q, (L["q_norm"], None), eps, "rmsnorm")
            k = norm(k, (L["k_norm"], None), eps, "rmsnorm")
        w = (cfg.get("layer_windows") or [0] * len(W["layers"]))[li]
        if cfg["position"] == "rope":
            if w > 0 and cfg.get("rotary_base_local"):  # Gemma 3's sliding layers
                rope = (pos, cfg["rotary_dim"], cfg["rotary_style"], cfg["rotary_base_local"], None)
            else:
                rope = (pos, cfg["rotary_dim"], cfg["rotary_style"], cfg["rotary_base"], cfg.get("rope_scaling"))
            q, k = _rotary(q, *rope), _rotary(k, *rope)
        if kv_store is not None:
            k, v = kv_store(li, k), kv_store(li, v)
        mask = causal & ((pos[:, None] - pos[None, :]) < w) if w > 0 else causal
        if pre is not None:
            k, v = torch.cat([pre[0], k]), torch.cat([pre[1], v])
            mask = torch.cat([torch.ones(S, pre[0].shape[0], dtype=torch.bool), causal], dim=1)
        k = k.repeat_interleave(nh // kvh, dim=1)
        v = v.repeat_interleave(nh // kvh, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * (cfg.get("attention_scale") or 1.0 / math.sqrt(d))
        cap = cfg.get("attention_softcap")
        if cap:
            scores = cap * torch.tanh(scores / cap)
        if slopes is not None:
            scores = scores + slopes[:, None, None] * rel[None]
        scores = scores.masked_fill(~mask[None], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        o = torch.einsum("hqk,khd->qhd", p, v).reshape(S, nh * d)
        return lin(o, L["wo"], L["bo"])

    def ffn(h, L):
        if L.get("experts") is not None:
            return moe(h, L)
        a = _act(cfg["activation"], lin(h, L["w1"], L["b1"]))
        if L.get("wg") is not None:
            a = a * lin(h, L["wg"], L["bg"])
        return lin(a, L["w2"], L["b2"])

    def moe(h, L):
        # A layer of experts (Mixtral): softmax over every expert's router logit, the top k, renormalised
        # (moe_renormalise) or not; each token's output the weighted sum of its experts' FFNs, plus a
        # shared expert's (Qwen2-MoE) times sigmoid(h · shared_gate).
        p = torch.softmax(h @ L["router"], dim=-1)
        top, idx = torch.topk(p, cfg["moe_top_k"], dim=-1)
        if cfg.get("moe_renormalise", True):
            top = top / top.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            for w, e in zip(top[t], idx[t]):
                out[t] += w * ffn(h[t:t + 1], L["experts"][int(e)])[0]
        if L.get("shared") is not None:
            out = out + torch.sigmoid(h @ L["shared_gate"])[:, None] * ffn(h, L["shared"])
        return out

    for li, L in enumerate(W["layers"]):
        pre = prefix[li] if prefix is not None else None
        if pre is not None:
            assert cfg["norm"] == "pre" and not cfg["parallel_residual"] and slopes is None
        if cfg["norm"] == "post":
            x = _ln(x + attention(x, L, li), L["ln1"], eps)
            x = _ln(x + ffn(x, L), L["ln2"], eps)
        elif cfg["parallel_residual"]:
            h1 = _ln(x, L["ln1"], eps)
            h2 = h1 if cfg["shared_input_norm"] else _ln(x, L["ln2"], eps)
            x = x + attention(h1, L, li) + ffn(h2, L)
        else:
            a = attention(_ln(x, L["ln1"], eps), L, li, pre)
            x = x + (_ln(a, L["post_attn_ln"], eps) if L.get("post_attn_ln") is not None else a)
            f = ffn(_ln(x, L["ln2"], eps), L)
            x = x + (_ln(f, L["post_ffn_ln"], eps) if L.get("post_ffn_ln") is not None else f)
    if W.get("final_ln") is not None:
        x = _ln(x, W["final_ln"], eps)
    if W.get("project_out") is not None:
        x = mm(x, W["project_out"], "project")
    head = W["lm_head"] if W.get("lm_head") is not None else W["wte"]
    logits = mm(x, head.T, "head")
    if W.get("lm_head_bias") is not None:
        logits = logits + W["lm_head_bias"]
    cap = cfg.get("final_logit_softcap")
    if cap:
        logits = cap * torch.tanh(logits / cap)
    return logits


def greedy(cfg, W, ids, new_tokens, end_id, **kw):
    """Greedy continuation: (tokens, logits of each step [n, V]); stops after end_id. kw: forward's."""
    seq = list(ids)
    toks, steps = [], []
    for _ in range(new_tokens):
        logits = forward(cfg, W, seq, **kw)[-1]
        steps.append(logits)
        t = int(torch.argmax(logits))
        toks.append(t)
        seq.append(t)
        if t == end_id:
            break
    return toks, steps
