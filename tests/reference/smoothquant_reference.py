"""Float64 PyTorch reference of TensorRT-LLM's SmoothQuant export for an FT folder, written from the
formulas (TensorRT-LLM's generate_int8 / smooth_gemm /
smooth_gemm_fc1_gate for its GPT and Llama models), not from ftx:

  capture_ranges  TensorRT-LLM smoothquant.py capture_activation_range on a GPT-2-style folder (pre-LN,
                  learned positions, biases, tanh GELU): every sample alone, per GEMM per-channel
                  max |input| (x), max |output| incl. bias (y), max |W| per output column clipped at
                  1e-8 (w). (Other architectures: smoothquant_test.reference_ranges on
                  gpt_reference.forward.)
  smooth          hf_gpt_convert.py smooth_gpt_model + smooth_gemm: s = x^a / max_row|W|^(1-a),
                  clamped >= 1e-5; LN gamma (and beta, when there is one) / s; W rows * s; x / s; w
                  recomputed. A gated FFN's FC1 and gate projection share one s from the larger of
                  their row maxima (smooth_gemm_fc1_gate).
  int8_files      utils/convert.py generate_int8 + write_int8 for an inference TP size: a dict
                  file name -> numpy array (the bytes ftx should write). QKV's "per tensor" is one
                  scale each for Q, K and V, whatever their widths (grouped-query: TensorRT-LLM's
                  multi_query_mode branch), broadcast over their columns; every rank holds its part
                  of each of Q, K and V (multi-query: K and V whole, qkv_segments).

Tensors are float64 torch tensors keyed by FT name (full, unsplit), weights [in, out].
"""
import configparser
import math
import os

import numpy as np
import torch

GEMMS = ["attention.query_key_value", "attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"]
NP_DTYPES = {"fp32": np.float32, "fp16": np.float16}


def read_config(folder):
    cp = configparser.ConfigParser()
    cp.read(os.path.join(folder, "config.ini"))
    return cp["gpt"]


def qkv_segments(c):
    """[(width, split)] of the Q, K and V columns of the full QKV: every one split over the ranks,
    except multi-query's one K/V head, whole on every rank (docs/ft-layout.md#splitting-over-tp-ranks)."""
    nh, d = int(c["head_num"]), int(c["size_per_head"])
    kv = int(c.get("kv_head_num", "0")) or nh
    whole = c.get("multi_query_mode", "False") == "True" or (kv == 1 and nh > 1)
    return [(nh * d, True), (kv * d, not whole), (kv * d, not whole)]


def rank_part(name, a, c, tp, rank):
    """Rank `rank`'s part of the full FT tensor `name` (a weight, a bias, or a per-column vector of a
    GEMM named by its weight) as the converters split it."""
    if ".query_key_value." in name:
        parts, at = [], 0
        for w, split in qkv_segments(c):
            seg = a[..., at:at + w]
            parts.append(np.split(seg, tp, axis=-1)[rank] if split else seg)
            at += w
        return np.concatenate(parts, axis=-1)
    if ".dense_h_to_4h." in name:
        return np.split(a, tp, axis=-1)[rank]
    if name.endswith(("attention.dense.weight", "dense_4h_to_h.weight")):
        return np.split(a, tp, axis=0)[rank]
    return a


def copy_kv_heads(c, T, R, tp):
    """For tp ranks and g < tp K/V heads (TensorRT-LLM's dup_kv_weight, convert-hf's copies): every K/V
    head's d columns of QKV (weight, bias, and the QKV ranges' y and w) repeated tp/g times in place,
    [k0 k1] -> [k0 k0 k1 k1]. Returns (config dict with kv_head_num = tp, T, R), new copies."""
    nh, d = int(c["head_num"]), int(c["size_per_head"])
    g = int(c["kv_head_num"])
    times = tp // g

    def rep(a):
        q, k, v = _qkv_columns(c, a)
        heads = lambda t: [t[..., h * d:(h + 1) * d] for h in range(g) for _ in range(times)]  # noqa: E731
        return torch.cat([q] + heads(k) + heads(v), dim=-1)

    T2, R2 = dict(T), {k: dict(v) for k, v in R.items()}
    for l in range(int(c["num_layer"])):
        key = f"model.layers.{l}.attention.query_key_value"
        for part in (".weight", ".bias"):
            if key + part in T:
                T2[key + part] = rep(T[key + part])
        if key in R:
            R2[key]["y"], R2[key]["w"] = rep(R[key]["y"]), rep(R[key]["w"])
    c2 = dict(c)
    c2["kv_head_num"] = str(tp)
    assert nh % tp == 0
    return c2, T2, R2


def is_split(name):
    return (".query_key_value." in name or ".dense_h_to_4h." in name or name.endswith("attention.dense.weight")
            or name.endswith("dense_4h_to_h.weight"))


def read_tp1_folder(folder):
    """(config section, {FT name: float64 tensor}) of every floating-point tensor of a TP-1 FT folder
    of the GPT family's layout (gpt section: GPT-2, Megatron, BLOOM, OPT, and the Llama family's
    rope / RMSNorm / GQA / gated FFN models)."""
    c = read_config(folder)
    assert int(c["tensor_para_size"]) == 1
    dt = NP_DTYPES[c["weight_data_type"]]
    H = int(c["head_num"]) * int(c["size_per_head"])
    qkv = sum(w for w, _ in qkv_segments(c))
    inter, L, V = int(c["inter_size"]), int(c["num_layer"]), int(c["vocab_size"])
    shapes = {"model.wte": (V, H), "model.wpe": (-1, H), "model.lm_head.weight": (V, H)}
    for ln in ("pre_decoder_layernorm", "final_layernorm"):
        shapes.update({f"model.{ln}.weight": (H,), f"model.{ln}.bias": (H,)})
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (H,), p + "input_layernorm.bias": (H,),
                       p + "attention.query_key_value.weight": (H, qkv), p + "attention.query_key_value.bias": (qkv,),
                       p + "attention.dense.weight": (H, H), p + "attention.dense.bias": (H,),
                       p + "post_attention_layernorm.weight": (H,), p + "post_attention_layernorm.bias": (H,),
                       p + "mlp.dense_h_to_4h.weight": (H, inter), p + "mlp.dense_h_to_4h.bias": (inter,),
                       p + "mlp.dense_h_to_4h.gate.weight": (H, inter), p + "mlp.dense_h_to_4h.gate.bias": (inter,),
                       p + "mlp.dense_4h_to_h.weight": (inter, H), p + "mlp.dense_4h_to_h.bias": (H,)})
    T = {}
    for name, shape in shapes.items():
        path = os.path.join(folder, name + (".0.bin" if is_split(name) else ".bin"))
        if os.path.exists(path):
            T[name] = torch.from_numpy(np.fromfile(path, dtype=dt).astype(np.float64).reshape(shape))
    return c, T


def _ln(x, g, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * g + b


def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def capture_ranges(c, T, samples):
    """{gemm key: {"x", "y", "w"}} over `samples` (lists of ids), each run alone."""
    H = int(c["head_num"]) * int(c["size_per_head"])
    nh, d, L, eps = int(c["head_num"]), int(c["size_per_head"]), int(c["num_layer"]), float(c["layernorm_eps"])
    R = {}

    def lin(key, x):
        y = x @ T[key + ".weight"] + T[key + ".bias"]
        r = R.setdefault(key, {})
        for k, v in (("x", x), ("y", y)):
            m = v.abs().amax(dim=0)
            r[k] = torch.maximum(r[k], m) if k in r else m
        return y

    for ids in samples:
        S = len(ids)
        x = T["model.wte"][torch.tensor(ids)] + T["model.wpe"][:S]
        causal = torch.tril(torch.ones(S, S, dtype=torch.bool))
        for l in range(L):
            p = f"model.layers.{l}."
            h = _ln(x, T[p + "input_layernorm.weight"], T[p + "input_layernorm.bias"], eps)
            qkv = lin(p + "attention.query_key_value", h)
            q, k, v = (qkv[:, i * H:(i + 1) * H].reshape(S, nh, d) for i in range(3))
            sc = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(d)
            pr = torch.softmax(sc.masked_fill(~causal[None], float("-inf")), dim=-1)
            o = torch.einsum("hqk,khd->qhd", pr, v).reshape(S, H)
            x = x + lin(p + "attention.dense", o)
            h = _ln(x, T[p + "post_attention_layernorm.weight"], T[p + "post_attention_layernorm.bias"], eps)
            x = x + lin(p + "mlp.dense_4h_to_h", _gelu_tanh(lin(p + "mlp.dense_h_to_4h", h)))
    for key in R:
        R[key]["w"] = T[key + ".weight"].abs().clamp(min=1e-8).amax(dim=0)
    return R


def f32(t):
    """Rounded to float32 (the precision the smoothed model is held in), kept as float64."""
    return t.to(torch.float32).to(torch.float64)


def smooth(c, T, R, alpha):
    """Smooths T and R in place (QKV <- input LN, FC1 and a gated FFN's gate jointly <- post-attention LN)."""
    for l in range(int(c["num_layer"])):
        p = f"model.layers.{l}."
        for gemms, ln in ((["attention.query_key_value"], "input_layernorm"),
                          (["mlp.dense_h_to_4h", "mlp.dense_h_to_4h.gate"], "post_attention_layernorm")):
            keys = [p + g for g in gemms if p + g + ".weight" in T]
            wmax = torch.stack([T[k + ".weight"].abs().amax(dim=1) for k in keys]).amax(dim=0)  # per input channel
            s = (R[keys[0]]["x"].pow(alpha) / wmax.pow(1 - alpha)).clamp(min=1e-5)
            for part in ("weight", "bias"):
                if p + ln + "." + part in T:
                    T[p + ln + "." + part] = f32(T[p + ln + "." + part] / s)
            for key in keys:
                T[key + ".weight"] = f32(T[key + ".weight"] * s[:, None])
                if key in R:
                    R[key]["x"] = R[key]["x"] / s
                    R[key]["w"] = T[key + ".weight"].abs().amax(dim=0)


def layer_gemms(T, l):
    """The quantised GEMMs of layer l: the four, and a gated FFN's gate projection."""
    return GEMMS + (["mlp.dense_h_to_4h.gate"] if f"model.layers.{l}.mlp.dense_h_to_4h.gate.weight" in T else [])


def _qkv_columns(c, a):
    """a [..., Q+K+V] -> the list of its Q, K, V column blocks."""
    out, at = [], 0
    for w, _ in qkv_segments(c):
        out.append(a[..., at:at + w])
        at += w
    return out


def _per_tensor(c, qkv, w):
    """127 / max w per column's tensor: one value, or for QKV one per Q, K and V broadcast to its columns."""
    if not qkv:
        return np.array(127.0 / w.max())
    return np.concatenate([np.full(b.shape[-1], 127.0 / b.max()) for b in _qkv_columns(c, w)])


def stored(t, dtype):
    """The values a weight file of `dtype` holds (float64 -> float32 -> dtype)."""
    return t.numpy().astype(np.float32).astype(NP_DTYPES[dtype])


def int8_files(c, T, R, tp, dtype, kv_only=False):
    """{file name: numpy array} of TensorRT-LLM's int8 and scale files for `tp` ranks."""
    out = {}

    def save(name, arr, rank=None):
        out[f"{name}.{rank}.bin" if rank is not None else f"{name}.bin"] = np.ascontiguousarray(arr)

    for l in range(int(c["num_layer"])):
        for gemm in layer_gemms(T, l):
            key = f"model.layers.{l}.{gemm}"
            qkv = gemm == "attention.query_key_value"
            if kv_only and not qkv:  # write_int8 is called only for QKV then
                continue
            r = R[key]
            x, y, w = (r[k].numpy() for k in ("x", "y", "w"))
            save(key + ".scale_y_quant_orig", np.array([y.max() / 127.0], dtype=np.float32))
            if kv_only:
                continue
            W = stored(T[key + ".weight"], dtype).astype(np.float64)
            sw_t, sw_c = _per_tensor(c, qkv, w), 127.0 / w
            sx, sy = 127.0 / x.max(), 127.0 / y.max()
            to_i8 = lambda a: np.clip(np.round(a), -127, 127).astype(np.int8)  # round half to even
            q_t, q_c = to_i8(W * sw_t), to_i8(W * sw_c)
            acc_t, acc_c = sy / (sx * sw_t), sy / (sx * sw_c)
            wqo_t, wqo_c = 1.0 / sw_t, 1.0 / sw_c
            col_parallel = gemm != "attention.dense" and gemm != "mlp.dense_4h_to_h"
            name = key + ".weight"
            for rank in range(tp):
                save(key + ".weight.int8", rank_part(name, q_t, c, tp, rank), rank)
                save(key + ".weight.int8.col", rank_part(name, q_c, c, tp, rank), rank)
                if col_parallel:
                    save(key + ".scale_w_quant_orig.col", rank_part(name, wqo_c.astype(np.float32), c, tp, rank), rank)
                    save(key + ".scale_y_accum_quant.col", rank_part(name, acc_c.astype(np.float32), c, tp, rank), rank)
            save(key + ".scale_x_orig_quant", np.array([sx], dtype=np.float32))
            save(key + ".scale_w_quant_orig", np.asarray(wqo_t, dtype=np.float32).reshape(-1))
            save(key + ".scale_y_accum_quant", np.asarray(acc_t, dtype=np.float32).reshape(-1))
            if not col_parallel:
                save(key + ".scale_w_quant_orig.col", wqo_c.astype(np.float32))
                save(key + ".scale_y_accum_quant.col", acc_c.astype(np.float32))
    return out


def unrounded_int8(c, T, R, dtype):
    """{GEMM key: (per-tensor, per-column) unrounded quantized values, full [rows, cols]} (to excuse
    int8 differences that lie on a rounding boundary)."""
    res = {}
    for l in range(int(c["num_layer"])):
        for gemm in layer_gemms(T, l):
            key = f"model.layers.{l}.{gemm}"
            W = stored(T[key + ".weight"], dtype).astype(np.float64)
            w = R[key]["w"].numpy()
            res[key] = (W * _per_tensor(c, gemm == "attention.query_key_value", w), W * (127.0 / w))
    return res


def ft_int8_files(c, T, R, tp, dtype):
    """{file name: numpy array} of FasterTransformer's OPT W8A8 files (huggingface_opt_convert.py
    `quantize`: per-tensor scales, QKV per Q/K/V), scales as fp32 (what FT's runtime reads)."""
    out = {}
    for l in range(int(c["num_layer"])):
        for gemm in GEMMS:
            key = f"model.layers.{l}.{gemm}"
            x, y = R[key]["x"].numpy(), R[key]["y"].numpy()
            W = stored(T[key + ".weight"], dtype).astype(np.float64)
            rows, cols = W.shape
            col_parallel = gemm in ("attention.query_key_value", "mlp.dense_h_to_4h")
            if gemm == "attention.query_key_value":
                W = W.reshape(rows, 3, cols // 3)
                ws = 127.0 / np.abs(W).clip(1e-8, None).max(axis=(0, 2))[None, :, None]
                a_in = np.full(3, 127.0 / x.max())
                a_post = 127.0 / y.reshape(3, -1).max(axis=1)
                wsr = ws[0] * np.ones((3, cols // 3 // tp))
                inter = a_post[:, None] / (a_in[:, None] * wsr)
            else:
                ws = 127.0 / np.abs(W).clip(1e-8, None).max()
                a_in = np.array([127.0 / x.max()])
                a_post = np.array([127.0 / y.max()])
                inter = a_post / (a_in * ws)
            q = np.clip(np.round(W * ws), -127, 127).astype(np.int8)
            for r, part in enumerate(np.split(q, tp, axis=-1 if col_parallel else 0)):
                out[f"{key}.weight.int8.{r}.bin"] = np.ascontiguousarray(part)
            out[f"{key}.scale.bin"] = a_in.astype(np.float32)
            out[f"{key}.scale_inter.bin"] = np.asarray(inter, dtype=np.float32).reshape(-1)
            out[f"{key}.scale_out.bin"] = (1.0 / a_post).astype(np.float32)
    return out


def ft_unrounded_int8(c, T, R, dtype):
    """As unrounded_int8, for ft_int8_files (per-tensor only: the same array twice)."""
    res = {}
    for l in range(int(c["num_layer"])):
        for gemm in GEMMS:
            key = f"model.layers.{l}.{gemm}"
            W = stored(T[key + ".weight"], dtype).astype(np.float64)
            rows, cols = W.shape
            if gemm == "attention.query_key_value":
                W = W.reshape(rows, 3, cols // 3)
                u = W * (127.0 / np.abs(W).clip(1e-8, None).max(axis=(0, 2))[None, :, None])
            else:
                u = W * (127.0 / np.abs(W).clip(1e-8, None).max())
            u = u.reshape(rows, cols)
            res[key] = (u, u)
    return res
