"""Float64 references for HF GPT-J, GPT-NeoX, BLOOM, OPT, XGLM and Llama-family (Llama, Mistral,
Qwen2) checkpoints, written from the HuggingFace model definitions (modeling_gptj.py,
modeling_gpt_neox.py, modeling_bloom.py, modeling_opt.py, modeling_xglm.py, modeling_llama.py,
modeling_mistral.py, modeling_qwen2.py, modeling_qwen3.py), independent of ftx's converter and engine.

`build(hf_dir)` reads config.json and the state dict (HF parameter names) and returns (cfg, W) for
gpt_reference.forward, the weights in their natural orientation (nn.Linear weight [out, in] is used
as x @ weight.T, so W holds weight.T):
  * GPT-J: q/k/v/out_proj without bias, interleaved rotary (rotate_every_two) on the first
    rotary_dim dims (the whole head when null), one LN feeding attention and MLP in parallel,
    lm_head with bias;
  * GPT-NeoX: query_key_value rows per head [n, 3, d] (view(..., n, 3d) then chunks of d),
    rotate_half rotary on int(d·rotary_pct) dims with base rotary_emb_base, parallel residual
    x + attn(ln1 x) + mlp(ln2 x) or sequential, untied embed_out;
  * BLOOM: word_embeddings_layernorm, query_key_value per head [n, 3, d], ALiBi (slopes of
    build_alibi_tensor times the key position), bloom_gelu (tanh form), tied lm_head;
  * OPT: learned positions at position + 2, ReLU, pre or post layernorm (do_layer_norm_before),
    decoder final_layer_norm only when pre-LN, project_in / project_out when present, lm_head
    tied to embed_tokens;
  * XGLM: embed_tokens · sqrt(d_model) (scale_embedding), sinusoidal positions at position + 2,
    pre-LN, exact GELU, model.layer_norm, lm_head tied to the unscaled embed_tokens.
  * Llama / Mistral / Qwen2: RMSNorm, q/k/v_proj with num_key_value_heads K/V heads (Qwen2: with
    biases), rotate_half rotary on the whole head with rope_theta and rope scaling (linear, llama3)
    read from transformers 5's rope_parameters or 4.x's rope_theta / rope_scaling,
    down(silu(gate(x)) · up(x)), lm_head or the tied embed_tokens; Mistral's sliding_window is
    returned in cfg["sliding_window"] for the caller (gpt_reference.forward's `window`);
    Mixtral (modeling_mixtral.py): Mistral's attention, every FFN a layer of experts: softmax of
    the router's logits (block_sparse_moe.gate) over all experts, the top num_experts_per_tok
    renormalised, each token the weighted sum of its experts' down(silu(w1 x) · w3 x);
    Qwen2-MoE / Qwen3-MoE (modeling_qwen2_moe.py, modeling_qwen3_moe.py): the layers with a router
    (mlp.gate) are layers of experts (gate_proj, up_proj, down_proj each), softmax over all experts,
    the top num_experts_per_tok, renormalised only with norm_topk_prob; Qwen2-MoE adds its
    shared_expert's FFN times sigmoid(x · shared_expert_gate); the other layers are dense;
    Qwen3: as Qwen2 without biases, head_dim (default 128) apart from hidden_size, q_norm / k_norm
    (RMSNorm over each head of q and k, before rotary); its default rope only (yarn is not here);
    Phi-3 / Phi-4-mini: Llama's math with q/k/v in one qkv_proj and gate/up in one gate_up_proj,
    rotary on int(head_dim · partial_rotary_factor) dims, longrope's short_factor and attention factor
    (sequences within original_max_position_embeddings only).
  * Gemma 2 / Gemma 3 text (modeling_gemma2.py, modeling_gemma3.py): RMSNorm scaling by (1 + w), four
    norms a layer (input, post_attention on the attention's output, pre_feedforward, post_feedforward),
    embeddings times sqrt(hidden_size), GeGLU with the tanh GELU, head_dim (default 256) apart from
    hidden_size, scores times query_pre_attn_scalar^-1/2 and softcapped (Gemma 2: 50 and 30 by
    default), windows on the sliding_attention layers of layer_types; Gemma 3: q_norm / k_norm, and its
    sliding layers rotate with rope_parameters.sliding_attention's base, unscaled.
"""
import json
import math
import os
import struct
from collections import OrderedDict

import torch

ACT = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
       "relu": "relu", "silu": "silu"}


def load_state(hf_dir):
    st = os.path.join(hf_dir, "model.safetensors")
    if os.path.exists(st):
        raw = open(st, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        sd = OrderedDict()
        for k, v in header.items():
            if k == "__metadata__":
                continue
            b, e = v["data_offsets"]
            dt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[v["dtype"]]
            buf = bytearray(raw[8 + n + b:8 + n + e])
            sd[k] = torch.frombuffer(buf, dtype=torch.int16 if dt == torch.bfloat16 else dt).view(dt).reshape(v["shape"])
        return sd
    return torch.load(os.path.join(hf_dir, "pytorch_model.bin"), map_location="cpu")


def _base_cfg(nh, d, eps, act):
    return {"heads": nh, "kv_heads": nh, "head_dim": d, "eps": eps, "norm": "pre", "parallel_residual": False,
            "shared_input_norm": False, "activation": act, "position": "none"}


def _per_head_qkv(w, n, d):
    """[n·3·d, ...] rows ordered [head, q|k|v, d] -> q, k, v rows [n·d, ...] each."""
    v = w.reshape(n, 3, d, *w.shape[1:])
    return [v[:, j].reshape(n * d, *w.shape[1:]) for j in range(3)]


def gptj(c, sd):
    g = lambda k: sd[k].double()  # noqa: E731
    H, nh = c["n_embd"], c["n_head"]
    d = H // nh
    layers = []
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        layers.append({"ln1": (g(p + "ln_1.weight"), g(p + "ln_1.bias")), "ln2": None,
                       "wq": g(p + "attn.q_proj.weight").T, "wk": g(p + "attn.k_proj.weight").T,
                       "wv": g(p + "attn.v_proj.weight").T, "bq": None, "bk": None, "bv": None,
                       "wo": g(p + "attn.out_proj.weight").T, "bo": None,
                       "w1": g(p + "mlp.fc_in.weight").T, "b1": g(p + "mlp.fc_in.bias"),
                       "w2": g(p + "mlp.fc_out.weight").T, "b2": g(p + "mlp.fc_out.bias")})
    W = {"wte": g("transformer.wte.weight"), "final_ln": (g("transformer.ln_f.weight"), g("transformer.ln_f.bias")),
         "lm_head": g("lm_head.weight"), "lm_head_bias": g("lm_head.bias"), "layers": layers}
    cfg = _base_cfg(nh, d, c.get("layer_norm_epsilon", 1e-5), ACT[c.get("activation_function", "gelu_new")])
    cfg.update(parallel_residual=True, shared_input_norm=True, position="rope",
               rotary_dim=c.get("rotary_dim") or d, rotary_style="interleaved", rotary_base=10000.0)
    return cfg, W


def gpt_neox(c, sd):
    g = lambda k: sd[k].double()  # noqa: E731
    H, nh = c["hidden_size"], c["num_attention_heads"]
    d = H // nh
    layers = []
    for i in range(c["num_hidden_layers"]):
        p = f"gpt_neox.layers.{i}."
        q, k, v = _per_head_qkv(g(p + "attention.query_key_value.weight"), nh, d)
        bq, bk, bv = _per_head_qkv(g(p + "attention.query_key_value.bias"), nh, d)
        layers.append({"ln1": (g(p + "input_layernorm.weight"), g(p + "input_layernorm.bias")),
                       "ln2": (g(p + "post_attention_layernorm.weight"), g(p + "post_attention_layernorm.bias")),
                       "wq": q.T, "wk": k.T, "wv": v.T, "bq": bq, "bk": bk, "bv": bv,
                       "wo": g(p + "attention.dense.weight").T, "bo": g(p + "attention.dense.bias"),
                       "w1": g(p + "mlp.dense_h_to_4h.weight").T, "b1": g(p + "mlp.dense_h_to_4h.bias"),
                       "w2": g(p + "mlp.dense_4h_to_h.weight").T, "b2": g(p + "mlp.dense_4h_to_h.bias")})
    W = {"wte": g("gpt_neox.embed_in.weight"),
         "final_ln": (g("gpt_neox.final_layer_norm.weight"), g("gpt_neox.final_layer_norm.bias")),
         "lm_head": g("embed_out.weight"), "layers": layers}
    cfg = _base_cfg(nh, d, c.get("layer_norm_eps", 1e-5), ACT[c.get("hidden_act", "gelu")])
    cfg.update(parallel_residual=c.get("use_parallel_residual", True), position="rope",
               rotary_dim=int(d * c.get("rotary_pct", 0.25)), rotary_style="half_split",
               rotary_base=float(c.get("rotary_emb_base", 10000)))
    return cfg, W


def bloom(c, sd):
    sd = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in sd.items()}
    g = lambda k: sd[k].double()  # noqa: E731
    H, nh = c.get("hidden_size", c.get("n_embed")), c["n_head"]
    d = H // nh
    assert not c.get("apply_residual_connection_post_layernorm", False)
    layers = []
    for i in range(c["n_layer"]):
        p = f"h.{i}."
        q, k, v = _per_head_qkv(g(p + "self_attention.query_key_value.weight"), nh, d)
        bq, bk, bv = _per_head_qkv(g(p + "self_attention.query_key_value.bias"), nh, d)
        layers.append({"ln1": (g(p + "input_layernorm.weight"), g(p + "input_layernorm.bias")),
                       "ln2": (g(p + "post_attention_layernorm.weight"), g(p + "post_attention_layernorm.bias")),
                       "wq": q.T, "wk": k.T, "wv": v.T, "bq": bq, "bk": bk, "bv": bv,
                       "wo": g(p + "self_attention.dense.weight").T, "bo": g(p + "self_attention.dense.bias"),
                       "w1": g(p + "mlp.dense_h_to_4h.weight").T, "b1": g(p + "mlp.dense_h_to_4h.bias"),
                       "w2": g(p + "mlp.dense_4h_to_h.weight").T, "b2": g(p + "mlp.dense_4h_to_h.bias")})
    W = {"wte": g("word_embeddings.weight"),
         "pre_ln": (g("word_embeddings_layernorm.weight"), g("word_embeddings_layernorm.bias")),
         "final_ln": (g("ln_f.weight"), g("ln_f.bias")), "layers": layers}
    cfg = _base_cfg(nh, d, c.get("layer_norm_epsilon", 1e-5), "gelu_tanh")
    cfg.update(position="alibi")
    return cfg, W


def _fairseq_layers(g, prefix, n):
    layers = []
    for i in range(n):
        p = f"{prefix}layers.{i}."
        a = p + "self_attn."
        layers.append({"ln1": (g(p + "self_attn_layer_norm.weight"), g(p + "self_attn_layer_norm.bias")),
                       "ln2": (g(p + "final_layer_norm.weight"), g(p + "final_layer_norm.bias")),
                       "wq": g(a + "q_proj.weight").T, "wk": g(a + "k_proj.weight").T, "wv": g(a + "v_proj.weight").T,
                       "bq": g(a + "q_proj.bias"), "bk": g(a + "k_proj.bias"), "bv": g(a + "v_proj.bias"),
                       "wo": g(a + "out_proj.weight").T, "bo": g(a + "out_proj.bias"),
                       "w1": g(p + "fc1.weight").T, "b1": g(p + "fc1.bias"),
                       "w2": g(p + "fc2.weight").T, "b2": g(p + "fc2.bias")})
    return layers


def opt(c, sd):
    g = lambda k: sd[k].double()  # noqa: E731
    H, nh = c["hidden_size"], c["num_attention_heads"]
    pre = c.get("do_layer_norm_before", True)
    P = "model.decoder."
    W = {"wte": g(P + "embed_tokens.weight"), "wpe": g(P + "embed_positions.weight"),
         "layers": _fairseq_layers(g, P, c["num_hidden_layers"])}
    W["lm_head"] = g("lm_head.weight") if "lm_head.weight" in sd else W["wte"]
    if pre and P + "final_layer_norm.weight" in sd:
        W["final_ln"] = (g(P + "final_layer_norm.weight"), g(P + "final_layer_norm.bias"))
    if P + "project_in.weight" in sd:
        W["project_in"] = g(P + "project_in.weight").T     # Linear(E -> H)
        W["project_out"] = g(P + "project_out.weight").T   # Linear(H -> E)
    cfg = _base_cfg(nh, H // nh, 1e-5, ACT[c.get("activation_function", "relu")])
    cfg.update(norm="pre" if pre else "post", position="learned", position_offset=2)
    return cfg, W


def xglm(c, sd):
    g = lambda k: sd[k].double()  # noqa: E731
    H, nh = c["d_model"], c["attention_heads"]
    W = {"wte": g("model.embed_tokens.weight"), "layers": _fairseq_layers(g, "model.", c["num_layers"]),
         "final_ln": (g("model.layer_norm.weight"), g("model.layer_norm.bias"))}
    W["lm_head"] = g("lm_head.weight") if "lm_head.weight" in sd else W["wte"]
    cfg = _base_cfg(nh, H // nh, 1e-5, ACT[c.get("activation_function", "gelu")])
    cfg.update(position="sinusoidal", position_offset=2,
               embedding_scale=math.sqrt(H) if c.get("scale_embedding", True) else 1.0)
    return cfg, W


def _rope_of(c):
    """(rope_theta, rope scaling for gpt_reference) from rope_parameters (5.x) or the top level (4.x)."""
    rp = c.get("rope_parameters") or {}
    theta = float(rp.get("rope_theta", c.get("rope_theta", 10000.0)))
    sc = rp if rp.get("rope_type", "default") != "default" else (c.get("rope_scaling") or {})
    kind = sc.get("rope_type", sc.get("type", "default"))
    if kind == "default":
        return theta, None
    if kind == "linear":
        return theta, {"type": "linear", "factor": float(sc["factor"])}
    if kind == "longrope":
        # Phi-3: short_factor within original_max_position_embeddings; the attention factor given, or
        # sqrt(1 + ln(factor) / ln(original)) with factor = max_position_embeddings / original when absent.
        L = int(c.get("original_max_position_embeddings", 4096))
        factor = float(sc.get("factor") or c["max_position_embeddings"] / L)
        af = sc.get("attention_factor")
        if af is None:
            af = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(L))
        return theta, {"type": "longrope", "short_factor": [float(x) for x in sc["short_factor"]],
                       "attention_factor": float(af)}
    assert kind == "llama3", kind
    return theta, {"type": "llama3", "factor": float(sc["factor"]), "low_freq_factor": float(sc["low_freq_factor"]),
                   "high_freq_factor": float(sc["high_freq_factor"]),
                   "original_max_position_embeddings": int(sc["original_max_position_embeddings"])}


def _unfused(c, sd):
    """Phi-3's fused self_attn.qkv_proj ([q heads | k heads | v heads] rows) and mlp.gate_up_proj
    ([gate | up] rows) as Llama's separate tensors."""
    H, nh = c["hidden_size"], c["num_attention_heads"]
    d, kvh, inter = H // nh, c.get("num_key_value_heads") or nh, c["intermediate_size"]
    out = {}
    for k, v in sd.items():
        if k.endswith("self_attn.qkv_proj.weight"):
            a = k[: -len("qkv_proj.weight")]
            out[a + "q_proj.weight"], out[a + "k_proj.weight"], out[a + "v_proj.weight"] = \
                v[: nh * d], v[nh * d: (nh + kvh) * d], v[(nh + kvh) * d:]
        elif k.endswith("mlp.gate_up_proj.weight"):
            m = k[: -len("gate_up_proj.weight")]
            out[m + "gate_proj.weight"], out[m + "up_proj.weight"] = v[:inter], v[inter:]
        else:
            out[k] = v
    return out


def llama(c, sd):
    if c["model_type"] == "phi3":
        sd = _unfused(c, sd)
    g = lambda k: sd[k].double()  # noqa: E731
    opt = lambda k: sd[k].double() if k in sd else None  # noqa: E731
    opt_t = lambda k: sd[k].double().T if k in sd else None  # noqa: E731  (a dense FFN; Mixtral's are experts)
    H, nh = c["hidden_size"], c["num_attention_heads"]
    # Qwen3Config's head_dim is a field with default 128; the others' is hidden_size / heads.
    d = c.get("head_dim") or (128 if c["model_type"] == "qwen3" else H // nh)
    qwen_moe = c["model_type"] in ("qwen2_moe", "qwen3_moe")
    layers = []
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        layers.append({"ln1": (g(p + "input_layernorm.weight"), None),
                       "ln2": (g(p + "post_attention_layernorm.weight"), None),
                       "wq": g(a + "q_proj.weight").T, "wk": g(a + "k_proj.weight").T, "wv": g(a + "v_proj.weight").T,
                       "bq": opt(a + "q_proj.bias"), "bk": opt(a + "k_proj.bias"), "bv": opt(a + "v_proj.bias"),
                       "wo": g(a + "o_proj.weight").T, "bo": None,
                       "w1": opt_t(p + "mlp.gate_proj.weight"), "b1": None,
                       "wg": opt_t(p + "mlp.up_proj.weight"), "bg": None,
                       "w2": opt_t(p + "mlp.down_proj.weight"), "b2": None,
                       "q_norm": opt(a + "q_norm.weight"), "k_norm": opt(a + "k_norm.weight")})
    if c["model_type"] == "mixtral":  # every FFN a layer of experts (block_sparse_moe, modeling_mixtral.py)
        for i, L in enumerate(layers):
            m = f"model.layers.{i}.block_sparse_moe."
            L["router"] = g(m + "gate.weight").T
            L["experts"] = [{"w1": g(f"{m}experts.{e}.w1.weight").T, "b1": None,
                             "wg": g(f"{m}experts.{e}.w3.weight").T, "bg": None,
                             "w2": g(f"{m}experts.{e}.w2.weight").T, "b2": None}
                            for e in range(c["num_local_experts"])]
    if qwen_moe:  # the layers with a router (mlp.gate) have experts, the others a dense FFN
        ffn = lambda m: {"w1": g(m + "gate_proj.weight").T, "b1": None, "wg": g(m + "up_proj.weight").T,  # noqa: E731
                         "bg": None, "w2": g(m + "down_proj.weight").T, "b2": None}
        for i, L in enumerate(layers):
            m = f"model.layers.{i}.mlp."
            if m + "gate.weight" in sd:
                L["router"] = g(m + "gate.weight").T
                L["experts"] = [ffn(f"{m}experts.{e}.") for e in range(c.get("num_experts") or c["num_local_experts"])]
                if m + "shared_expert_gate.weight" in sd:  # Qwen2-MoE
                    L["shared"], L["shared_gate"] = ffn(m + "shared_expert."), g(m + "shared_expert_gate.weight")[0]
    W = {"wte": g("model.embed_tokens.weight"), "final_ln": (g("model.norm.weight"), None), "layers": layers}
    W["lm_head"] = None if c.get("tie_word_embeddings", False) else g("lm_head.weight")
    theta, scaling = _rope_of(c)
    cfg = _base_cfg(nh, d, c.get("rms_norm_eps", 1e-6), "swiglu")
    if c["model_type"] == "mixtral":
        cfg.update(moe_top_k=c["num_experts_per_tok"], moe_renormalise=True)
    if qwen_moe:
        cfg.update(moe_top_k=c["num_experts_per_tok"], moe_renormalise=bool(c.get("norm_topk_prob", False)))
    rp = c.get("rope_parameters") or {}
    rot = int(d * float(rp.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0))))
    cfg.update(kv_heads=c.get("num_key_value_heads") or nh, normalization="rmsnorm", position="rope", rotary_dim=rot,
               rotary_style="half_split", rotary_base=theta, rope_scaling=scaling,
               sliding_window=(c.get("sliding_window") or 0) if c.get("use_sliding_window", True) else 0)
    return cfg, W


def gemma(c, sd):
    g = lambda k: sd[k].double()  # noqa: E731
    one = lambda k: sd[k].double() + 1.0 if k in sd else None  # noqa: E731  (1 + w)
    H, nh = c["hidden_size"], c["num_attention_heads"]
    d = c.get("head_dim") or 256
    gemma2 = c["model_type"] == "gemma2"
    layers = []
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        layers.append({"ln1": (one(p + "input_layernorm.weight"), None),
                       "post_attn_ln": (one(p + "post_attention_layernorm.weight"), None),
                       "ln2": (one(p + "pre_feedforward_layernorm.weight"), None),
                       "post_ffn_ln": (one(p + "post_feedforward_layernorm.weight"), None),
                       "wq": g(a + "q_proj.weight").T, "wk": g(a + "k_proj.weight").T, "wv": g(a + "v_proj.weight").T,
                       "bq": None, "bk": None, "bv": None, "wo": g(a + "o_proj.weight").T, "bo": None,
                       "w1": g(p + "mlp.gate_proj.weight").T, "b1": None,
                       "wg": g(p + "mlp.up_proj.weight").T, "bg": None,
                       "w2": g(p + "mlp.down_proj.weight").T, "b2": None,
                       "q_norm": one(a + "q_norm.weight"), "k_norm": one(a + "k_norm.weight")})
    W = {"wte": g("model.embed_tokens.weight"), "final_ln": (one("model.norm.weight"), None), "layers": layers,
         "lm_head": None if c.get("tie_word_embeddings", True) else g("lm_head.weight")}
    rp = c.get("rope_parameters") or {}
    full = rp.get("full_attention", rp)
    theta, scaling = _rope_of(dict(c, rope_parameters=full))
    local = rp.get("sliding_attention", {}).get("rope_theta", c.get("rope_local_base_freq", 10000.0))
    types = c["layer_types"]
    cfg = _base_cfg(nh, d, c.get("rms_norm_eps", 1e-6), "geglu_tanh")
    cfg.update(kv_heads=c.get("num_key_value_heads") or nh, normalization="rmsnorm", position="rope", rotary_dim=d,
               rotary_style="half_split", rotary_base=theta, rope_scaling=scaling, sliding_window=0,
               embedding_scale=math.sqrt(H), attention_scale=float(c.get("query_pre_attn_scalar", 256)) ** -0.5,
               attention_softcap=c.get("attn_logit_softcapping", 50.0 if gemma2 else None),
               final_logit_softcap=c.get("final_logit_softcapping", 30.0 if gemma2 else None),
               layer_windows=[c["sliding_window"] if t == "sliding_attention" else 0 for t in types],
               rotary_base_local=None if gemma2 else float(local))
    return cfg, W


def build(hf_dir):
    c = json.load(open(os.path.join(hf_dir, "config.json")))
    sd = load_state(hf_dir)
    return {"gptj": gptj, "gpt_neox": gpt_neox, "bloom": bloom, "opt": opt, "xglm": xglm, "llama": llama,
            "mistral": llama, "mixtral": llama, "qwen2_moe": llama, "qwen3_moe": llama, "qwen2": llama, "qwen3": llama,
            "phi3": llama, "gemma2": gemma, "gemma3_text": gemma}[c["model_type"]](c, sd)
