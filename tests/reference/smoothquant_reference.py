"""Float64 PyTorch reference of TensorRT-LLM's SmoothQuant export for a GPT-2-style FT folder
(pre-LN, learned positions, biases, tanh GELU), written from the formulas (ft-runtime.md §4.2,
ft-format.md §3.5), not from ftx:

  capture_ranges  TensorRT-LLM smoothquant.py capture_activation_range: every sample alone, per GEMM
                  per-channel max |input| (x), max |output| incl. bias (y), max |W| per output column
                  clipped at 1e-8 (w).
  smooth          hf_gpt_convert.py smooth_gpt_model + smooth_gemm: s = x^a / max_row|W|^(1-a),
                  clamped >= 1e-5; LN gamma, beta / s; W rows * s; x / s; w recomputed.
  int8_files      utils/convert.py generate_int8 + write_int8 for an inference TP size: a dict
                  file name -> numpy array (the bytes ftx should write).

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


def read_tp1_folder(folder):
    """(config section, {FT name: float64 tensor}) of a TP-1 GPT-2 FT folder."""
    c = read_config(folder)
    assert int(c["tensor_para_size"]) == 1
    dt = NP_DTYPES[c["weight_data_type"]]
    H = int(c["head_num"]) * int(c["size_per_head"])
    inter, L, V, P = int(c["inter_size"]), int(c["num_layer"]), int(c["vocab_size"]), int(c["max_pos_seq_len"])
    shapes = {"model.wte": (V, H), "model.wpe": (P, H), "model.final_layernorm.weight": (H,),
              "model.final_layernorm.bias": (H,)}
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (H,), p + "input_layernorm.bias": (H,),
                       p + "attention.query_key_value.weight": (H, 3 * H), p + "attention.query_key_value.bias": (3 * H,),
                       p + "attention.dense.weight": (H, H), p + "attention.dense.bias": (H,),
                       p + "post_attention_layernorm.weight": (H,), p + "post_attention_layernorm.bias": (H,),
                       p + "mlp.dense_h_to_4h.weight": (H, inter), p + "mlp.dense_h_to_4h.bias": (inter,),
                       p + "mlp.dense_4h_to_h.weight": (inter, H), p + "mlp.dense_4h_to_h.bias": (H,)})
    T = {}
    for name, shape in shapes.items():
        fn = name + (".0.bin" if (".query_key_value." in name or ".dense_h_to_4h." in name or
                                  name.endswith("attention.dense.weight") or name.endswith("dense_4h_to_h.weight"))
                     else ".bin")
        a = np.fromfile(os.path.join(folder, fn), dtype=dt).astype(np.float64).reshape(shape)
        T[name] = torch.from_numpy(a)
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
    """Smooths T and R in place (QKV <- input LN, FC1 <- post-attention LN)."""
    for l in range(int(c["num_layer"])):
        p = f"model.layers.{l}."
        for gemm, ln in (("attention.query_key_value", "input_layernorm"), ("mlp.dense_h_to_4h", "post_attention_layernorm")):
            key = p + gemm
            W = T[key + ".weight"]                       # [in, out]
            wmax = W.abs().amax(dim=1)                   # per input channel
            s = (R[key]["x"].pow(alpha) / wmax.pow(1 - alpha)).clamp(min=1e-5)
            T[p + ln + ".weight"] = f32(T[p + ln + ".weight"] / s)
            T[p + ln + ".bias"] = f32(T[p + ln + ".bias"] / s)
            T[key + ".weight"] = f32(W * s[:, None])
            R[key]["x"] = R[key]["x"] / s
            R[key]["w"] = T[key + ".weight"].abs().amax(dim=0)


def stored(t, dtype):
    """The values a weight file of `dtype` holds (float64 -> float32 -> dtype)."""
    return t.numpy().astype(np.float32).astype(NP_DTYPES[dtype])


def int8_files(c, T, R, tp, dtype, kv_only=False):
    """{file name: numpy array} of TensorRT-LLM's int8 and scale files for `tp` ranks."""
    out = {}

    def save(name, arr, rank=None):
        out[f"{name}.{rank}.bin" if rank is not None else f"{name}.bin"] = np.ascontiguousarray(arr)

    for l in range(int(c["num_layer"])):
        for gemm in GEMMS:
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
            rows, cols = W.shape
            if qkv:
                sw_t = 127.0 / w.reshape(3, -1).max(axis=1, keepdims=True)   # [3, 1]
                sw_c = 127.0 / w.reshape(3, -1)                               # [3, H]
                W = W.reshape(rows, 3, cols // 3)
            else:
                sw_t = np.array(127.0 / w.max())
                sw_c = 127.0 / w
            sx, sy = 127.0 / x.max(), 127.0 / y.max()
            to_i8 = lambda a: np.clip(np.round(a), -127, 127).astype(np.int8)  # round half to even
            q_t, q_c = to_i8(W * sw_t), to_i8(W * sw_c)
            acc_t, acc_c = sy / (sx * sw_t), sy / (sx * sw_c)
            wqo_t, wqo_c = 1.0 / sw_t, 1.0 / sw_c
            if qkv:
                acc_t = np.broadcast_to(acc_t, sw_c.shape)
                wqo_t = np.broadcast_to(wqo_t, sw_c.shape)
            col_parallel = gemm in ("attention.query_key_value", "mlp.dense_h_to_4h")
            axis = -1 if col_parallel else 0
            for rank in range(tp):
                save(key + ".weight.int8", np.split(q_t, tp, axis=axis)[rank], rank)
                save(key + ".weight.int8.col", np.split(q_c, tp, axis=axis)[rank], rank)
                if col_parallel:
                    save(key + ".scale_w_quant_orig.col", np.split(wqo_c.astype(np.float32), tp, axis=-1)[rank], rank)
                    save(key + ".scale_y_accum_quant.col", np.split(acc_c.astype(np.float32), tp, axis=-1)[rank], rank)
            save(key + ".scale_x_orig_quant", np.array([sx], dtype=np.float32))
            save(key + ".scale_w_quant_orig", np.asarray(wqo_t, dtype=np.float32).reshape(-1))
            save(key + ".scale_y_accum_quant", np.asarray(acc_t, dtype=np.float32).reshape(-1))
            if not col_parallel:
                save(key + ".scale_w_quant_orig.col", wqo_c.astype(np.float32))
                save(key + ".scale_y_accum_quant.col", acc_c.astype(np.float32))
    return out


def unrounded_int8(c, T, R, dtype):
    """{weight.int8 file stem: (per-tensor, per-column) unrounded quantized values, full tensor}
    (to excuse int8 differences that lie on a rounding boundary)."""
    res = {}
    for l in range(int(c["num_layer"])):
        for gemm in GEMMS:
            key = f"model.layers.{l}.{gemm}"
            W = stored(T[key + ".weight"], dtype).astype(np.float64)
            w = R[key]["w"].numpy()
            if gemm == "attention.query_key_value":
                rows, cols = W.shape
                W = W.reshape(rows, 3, cols // 3)
                res[key] = (W * (127.0 / w.reshape(3, -1).max(axis=1, keepdims=True)), W * (127.0 / w.reshape(3, -1)))
            else:
                res[key] = (W * (127.0 / w.max()), W * (127.0 / w))
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
            if gemm == "attention.query_key_value":
                rows, cols = W.shape
                W = W.reshape(rows, 3, cols // 3)
                u = W * (127.0 / np.abs(W).clip(1e-8, None).max(axis=(0, 2))[None, :, None])
            else:
                u = W * (127.0 / np.abs(W).clip(1e-8, None).max())
            res[key] = (u, u)
    return res
