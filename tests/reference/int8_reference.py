"""Float64 emulation of FasterTransformer's weight-only INT8 (int8_mode 1), from FT's weight loader
and cutlass preprocessor as summarised below, not from ftx's code.

FT quantises each TP rank's GEMM weights at load time, per output column of the stored [in, out]
matrix: scale = max|column| / 128, q = round(w / scale) (half away from zero; cutlass's
preprocessor uses std::round), clamped to [-128, 127]; the GEMM then computes x · (q · scale).
The division runs in fp32 as on the device, on the fp32 values the engine loads; everything after
it is float64.

Column-parallel matrices (QKV, FFN in, gate) keep whole columns on a rank, so their scales do not
depend on TP. Row-parallel ones (attention output, FFN out) are split by input rows: each rank's
shard has its own column maxima, so the emulation quantises each of the `tp` row blocks alone.
"""
import copy

import torch


def quantize_columns(w):
    """w [in, out] (float64 holding fp32 values) -> the dequantised matrix q * scale, float64."""
    w32 = w.to(torch.float32)
    amax = w32.abs().amax(dim=0)
    scale = torch.where(amax > 0, amax / 128, torch.ones_like(amax))  # / 128 is exact in fp32
    x = (w32 / scale).to(torch.float64)
    q = torch.clamp(torch.sign(x) * torch.floor(torch.abs(x) + 0.5), -128, 127)
    return q * scale.to(torch.float64)


def quantize_row_blocks(w, tp):
    return torch.cat([quantize_columns(b) for b in w.chunk(tp, dim=0)], dim=0)


def weight_only_int8(W, tp, moe_ep=False):
    """The logical weights W (gpt_reference layout) as FT's int8_mode 1 computes with them at TP `tp`.
    A layer of experts: each expert's matrices as a dense FFN's (sliced over the ranks, or whole on one
    rank with moe_ep: expert parallelism), the router kept in floating point."""
    Q = copy.copy(W)
    Q["layers"] = []
    for L in W["layers"]:
        L = dict(L)
        for k in ("wq", "wk", "wv", "w1", "wg"):
            if L.get(k) is not None:
                L[k] = quantize_columns(L[k])
        L["wo"] = quantize_row_blocks(L["wo"], tp)
        if L.get("w2") is not None:
            L["w2"] = quantize_row_blocks(L["w2"], tp)
        if L.get("experts") is not None:
            L["experts"] = [dict(X, w1=quantize_columns(X["w1"]), wg=quantize_columns(X["wg"]),
                                 w2=quantize_row_blocks(X["w2"], 1 if moe_ep else tp)) for X in L["experts"]]
        Q["layers"].append(L)
    return Q


def weight_only_int8_head(W, tp):
    """weight_only_int8 with --int8-lm-head: the lm_head table (wte when tied; the embedding lookup
    keeps the floating-point wte) quantised too, each vocabulary row by the same rule. The head
    is computed whole on one rank, so TP does not change it."""
    Q = weight_only_int8(W, tp)
    table = W["lm_head"] if W.get("lm_head") is not None else W["wte"]
    Q["lm_head"] = quantize_columns(table.t()).t()
    return Q


# ---------------------------------------------------------------------------------------------------
# SmoothQuant W8A8 (int8_mode 2, TensorRT-LLM's --use_smooth_quant [--per_token] [--per_channel]),
# from TensorRT-LLM's weight.py and convert.py as summarised below, not from ftx's code. The model is a `ftx
# smoothquant` TP-1 folder: its smoothed floating-point tensors for everything but the four layer
# GEMMs, which use the folder's int8 files and scales:
#
#   per-tensor:  q_x = sat(rint(x · scale_x_orig_quant)),  y = (q_x · q_w) · scale_y_quant_orig · a_col,
#                a_col = scale_y_accum_quant (per tensor; QKV: one per Q, K, V) or .col (per column)
#   per-token:   amax = max|x_row|, q_x = sat(rint(x · 127/amax)), y = (q_x · q_w) · amax/127 · a_col,
#                a_col = scale_w_quant_orig (per tensor) or .col
#   per-channel: q_w from weight.int8.col, a_col from the .col scale files; else weight.int8.
# QKV's per-tensor scales are one per Q, K and V (of any widths: grouped-query and multi-query
# attention too); a gated FFN's gate projection is a W8A8 GEMM like FC1, whose input it reads.
# rint rounds half to even and sat clamps to [-128, 127] (PTX cvt.rni.sat.s8.f32); the integer
# product is exact; everything else is float64. The GEMM bias is added after.
#
# FasterTransformer's OPT files (config.ini int8_format = ft; FT's huggingface_opt_convert.py),
# per-tensor only: q_x = sat(rint(x · scale)), y = (q_x · q_w) · scale_out · scale_inter,
# scale_inter per column for QKV (one value per Q, K, V repeated), scale_out one per Q, K, V; the
# int32 sum is scaled straight to floating point, as in TensorRT-LLM's arithmetic above.
#
# Tensor parallelism: QKV and FC1 keep whole columns on a rank, so only the row-parallel GEMMs
# (attention.dense, FC2) see TP: each rank quantises its own slice of the input row (per-token:
# its own amax) and the ranks' dequantised partial products are summed.
# ---------------------------------------------------------------------------------------------------
import configparser  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402

_NP = {"fp32": np.float32, "fp16": np.float16}


def _ini(folder):
    cp = configparser.ConfigParser()
    cp.read(os.path.join(folder, "config.ini"))
    return cp[cp.sections()[0]]


def _read(folder, name, shape, dtype):
    path = os.path.join(folder, name)
    if dtype == "bf16":
        raw = np.fromfile(path, np.uint16).astype(np.uint32) << 16
        a = raw.view(np.float32)
    else:
        a = np.fromfile(path, _NP.get(dtype, dtype))
    return torch.from_numpy(a.astype(np.float64).reshape(shape))


def _exists(folder, name):
    return os.path.exists(os.path.join(folder, name))


def _rint_sat(v):
    return torch.clamp(torch.round(v), -128, 127)  # torch.round: half to even


class W8A8Gemm:
    """One layer GEMM as W8A8 computes it: y = gemm(x) (without the bias).

    W8A8Gemm.follow: None, or a function (gemm, part, v, q) -> q that may replace the rounded
    activations q = sat(rint(v)) of input slice `part` (the TP rank for a row-parallel GEMM, else 0).
    A test sets it to take an fp32 engine's own rounding where the engine's unrounded value lies on
    the other side of a rounding boundary (tests/reference/w8a8_follow.py); the formulas here do not
    change."""
    follow = None

    def __init__(self, q, a_col, act_scale, out_scale, row_parallel_tp, name=""):
        self.q, self.a_col = q, a_col                # [K, N] int8 values (float64), [N]
        self.act_scale, self.out_scale = act_scale, out_scale  # None: per-token
        self.tp = row_parallel_tp                    # > 1: input rows split over ranks
        self.name = name                             # "LAYER.qkv" | ".dense" | ".fc1" | ".fc2"

    def __call__(self, x):
        K = self.q.shape[0]
        y = torch.zeros(x.shape[0], self.q.shape[1], dtype=torch.float64)
        parts = zip(x.split(K // self.tp, dim=1), self.q.split(K // self.tp, dim=0))
        for part, (xs, qs) in enumerate(parts):
            if self.act_scale is None:
                amax = xs.abs().amax(dim=1, keepdim=True)
                safe = torch.where(amax > 0, amax, torch.ones_like(amax))
                v = xs * (127.0 / safe)
                qx = torch.where(amax > 0, _rint_sat(v), torch.zeros_like(xs))
                factor = (amax / 127.0) * self.a_col
            else:
                v = xs * self.act_scale
                qx = _rint_sat(v)
                factor = self.out_scale * self.a_col
            if W8A8Gemm.follow is not None:
                qx = W8A8Gemm.follow(self, part, v, qx)
            y += (qx @ qs) * factor
        return y


def folder_model(folder, layer_gemm):
    """(config section, logical weights W for gpt_reference.forward) of the TP-1 folder `folder`: its
    floating-point tensors, except the four layer GEMMs' weights, which are
    layer_gemm(prefix, gemm, K, N, cols, row_parallel): the weight object of columns `cols` (a slice;
    QKV is asked for Q, K and V apart) of GEMM `gemm` [K, N] of the layer whose files start with
    `prefix`; row_parallel for attention.dense and FC2 (input rows split over TP ranks). A gated
    FFN's gate projection (mlp.dense_h_to_4h.gate, [H, I]) is asked for when the folder has one.
    Multi-query attention (kv_head_num 1): QKV is [H, H + 2d], its K and V slices d wide."""
    c = _ini(folder)
    assert int(c["tensor_para_size"]) == 1, folder
    dt = c["weight_data_type"]
    nh, d = int(c["head_num"]), int(c["size_per_head"])
    H, I, nl, V = nh * d, int(c["inter_size"]), int(c["num_layer"]), int(c["vocab_size"])
    kvd = int(c.get("kv_head_num", nh)) * d
    qkv_cols = [slice(0, H), slice(H, H + kvd), slice(H + kvd, H + 2 * kvd)]

    def vec(name, n):
        return _read(folder, name, (n,), dt) if _exists(folder, name) else None

    W = {"wte": _read(folder, "model.wte.bin", (V, H), dt), "layers": []}
    W["wpe"] = (_read(folder, "model.wpe.bin", (-1, H), dt) if _exists(folder, "model.wpe.bin") else None)
    W["lm_head"] = (_read(folder, "model.lm_head.weight.bin", (V, H), dt)
                    if _exists(folder, "model.lm_head.weight.bin") else None)
    W["lm_head_bias"] = vec("model.lm_head.bias.bin", V)
    for key, ft in (("pre_ln", "pre_decoder_layernorm"), ("final_ln", "final_layernorm")):
        g = vec(f"model.{ft}.weight.bin", H)
        W[key] = (g, vec(f"model.{ft}.bias.bin", H)) if g is not None else None
    for l in range(nl):
        p = f"model.layers.{l}."
        qkv_b = vec(p + "attention.query_key_value.bias.0.bin", H + 2 * kvd)
        L = {"ln1": (vec(p + "input_layernorm.weight.bin", H), vec(p + "input_layernorm.bias.bin", H))}
        g2 = vec(p + "post_attention_layernorm.weight.bin", H)
        L["ln2"] = (g2, vec(p + "post_attention_layernorm.bias.bin", H)) if g2 is not None else None
        for i, k in enumerate("qkv"):
            L["w" + k] = layer_gemm(p, "attention.query_key_value", H, H + 2 * kvd, qkv_cols[i], False)
            L["b" + k] = qkv_b[qkv_cols[i]] if qkv_b is not None else None
        L["wo"] = layer_gemm(p, "attention.dense", H, H, slice(0, H), True)
        L["bo"] = vec(p + "attention.dense.bias.bin", H)
        L["w1"] = layer_gemm(p, "mlp.dense_h_to_4h", H, I, slice(0, I), False)
        L["b1"] = vec(p + "mlp.dense_h_to_4h.bias.0.bin", I)
        L["wg"], L["bg"] = None, None
        if _exists(folder, p + "mlp.dense_h_to_4h.gate.weight.0.bin"):
            L["wg"] = layer_gemm(p, "mlp.dense_h_to_4h.gate", H, I, slice(0, I), False)
            L["bg"] = vec(p + "mlp.dense_h_to_4h.gate.bias.0.bin", I)
        L["w2"] = layer_gemm(p, "mlp.dense_4h_to_h", I, H, slice(0, H), True)
        L["b2"] = vec(p + "mlp.dense_4h_to_h.bias.bin", H)
        s = vec(p + "mlp.attention.bias.sum.bin", H)  # GPT-NeoX: both output biases, summed
        if s is not None:
            L["bo"], L["b2"] = None, s
        W["layers"].append(L)
    return c, W


def w8a8_model(folder, tp, per_token, per_channel):
    """(logical weights W for gpt_reference.forward, with W8A8Gemm objects as the layer GEMMs'
    weights: the four and a gated FFN's gate) of the TP-1 smoothquant folder `folder`, emulating TP
    size `tp`."""
    c = _ini(folder)
    ft_files = c.get("int8_format", "trt-llm") == "ft"
    assert not (ft_files and (per_token or per_channel)), "FT's W8A8 files are per-tensor only"
    col = ".col" if per_channel else ""

    def f32(name, n):
        return _read(folder, name, (n,), np.float32)

    def layer_gemm(p, g, K, N, cols, row_parallel):
        qkv = g == "attention.query_key_value"
        seg = (0 if cols.start == 0 else 1 if cols.stop < N else 2) if qkv else 0  # Q, K or V
        if ft_files:
            # FT's OPT files: scale = s_x, scale_inter per column (QKV) or one value, scale_out
            # per Q, K, V (QKV) or one value; y = (q_x · q_w) · scale_out · scale_inter.
            q = _read(folder, f"{p}{g}.weight.int8.0.bin", (K, N), np.int8)
            a = f32(f"{p}{g}.scale_inter.bin", N) if qkv else f32(f"{p}{g}.scale_inter.bin", 1).expand(N)
            out = f32(f"{p}{g}.scale_out.bin", 3 if qkv else 1)
            xs, ys = float(f32(f"{p}{g}.scale.bin", 3 if qkv else 1)[0]), float(out[seg])
        else:
            q = _read(folder, f"{p}{g}.weight.int8{col}.0.bin", (K, N), np.int8)
            name = "scale_w_quant_orig" if per_token else "scale_y_accum_quant"
            if per_channel:
                a = f32(f"{p}{g}.{name}.col{'' if row_parallel else '.0'}.bin", N)
            elif qkv:
                a = f32(f"{p}{g}.{name}.bin", N)  # one per column: Q's, K's and V's value broadcast
            else:
                a = f32(f"{p}{g}.{name}.bin", 1).expand(N)
            xs = None if per_token else float(f32(f"{p}{g}.scale_x_orig_quant.bin", 1)[0])
            ys = None if per_token else float(f32(f"{p}{g}.scale_y_quant_orig.bin", 1)[0])
        short = {"attention.query_key_value": "qkv", "attention.dense": "dense", "mlp.dense_h_to_4h": "fc1",
                 "mlp.dense_h_to_4h.gate": "gate", "mlp.dense_4h_to_h": "fc2"}[g]
        return W8A8Gemm(q[:, cols], a[cols], xs, ys, tp if row_parallel else 1, f"{p.split('.')[2]}.{short}")

    return folder_model(folder, layer_gemm)[1]


def gemm_linear(orig_lin, kind):
    """gpt_reference._lin that runs weights of the GEMM class `kind` (y = w(x) + b; W8A8Gemm,
    fp8_reference.Fp8Gemm) and others as before."""
    def lin(x, w, b):
        if isinstance(w, kind):
            y = w(x)
            return y + b if b is not None else y
        return orig_lin(x, w, b)
    return lin


def w8a8_linear(orig_lin):
    """gpt_reference._lin that runs W8A8Gemm weights (and others as before)."""
    return gemm_linear(orig_lin, W8A8Gemm)
