"""Float64 reference of TensorRT-LLM's FP8 quantisation (FP8 weights and activations, FP8 KV cache),
written from the formulas (issue 29; TensorRT-LLM's FP8 Linear and FP8 KV cache, the per-tensor
scales amax / 448 of its FP8 GPT checkpoints), not from ftx. E4M3 conversions are ml_dtypes'
float8_e4m3fn (the package index; pinned in scripts/requirements/test.txt) of the value clipped to
±448: round to nearest even, saturating as NVIDIA's cvt.rn.satfinite does (ml_dtypes alone turns an
overflow into NaN).

  fp8_files   the export (`ftx smoothquant --fp8`) of an FT model's full tensors T and calibration
              ranges R (smoothquant_reference's x per GEMM) and K/V ranges for an inference TP size:
              {file name: numpy array}, the bytes ftx must write:
                s_w = fp32(max(max|W|, 1e-8) / 448)   W as stored (fp32, fp16 or bf16 values)
                s_x = fp32(max(max x, 1e-8) / 448)
                weight.fp8 = E4M3(fp32(W / s_w)), split per rank as the weight (QKV per Q, K and V:
                             smoothquant_reference.qkv_segments)
                kv_cache_scaling_factor = fp32(max(max|K|, max|V|, 1e-8) / 448)
              (a gated FFN's gate projection too, with FC1's input range: it reads FC1's input)
  fp8_model   the arithmetic of the FP8 modes on a TP-1 folder with those files, for
              gpt_reference.forward (via int8_reference.folder_model):
                y = (E4M3(x · fp32(1/s_x)) @ q_w) · fp32(s_x · s_w)   (+ bias), products and sums float64
              and the FP8 KV cache as a kv_store hook: K, V -> E4M3(t · fp32(1/s_kv)) · s_kv.
Tensor parallelism changes nothing here: the scales are per tensor, so each rank's slice of an
input is quantised to the same values as the whole; only the engine's fp32 sums move.
"""
import os

import ml_dtypes
import numpy as np
import torch

import int8_reference
import smoothquant_reference as sqr

E4M3 = ml_dtypes.float8_e4m3fn
GEMMS = ["attention.query_key_value", "attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"]
GATE = "mlp.dense_h_to_4h.gate"


def e4m3_codes(x):
    """uint8 codes of float32 or float64 values (one rounding: ml_dtypes converts from either)."""
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        return np.clip(x, -448.0, 448.0).astype(E4M3).view(np.uint8)


def e4m3_values(x):
    """The E4M3 values of x, as float64."""
    return e4m3_codes(x).view(E4M3).astype(np.float64)


def is_fp8_file(name):
    """The files fp8_files writes (and nothing else an FT folder holds)."""
    return name.startswith("model.layers.") and (".weight.fp8." in name or name.endswith(
        (".weights_scaling_factor.bin", ".activation_scaling_factor.bin", ".kv_cache_scaling_factor.bin")))


def scale_of(amax):
    return np.float32(max(float(amax), 1e-8) / 448.0)


def fp8_files(c, T, R, kv, tp, dtype, stored):
    """{file name: numpy array}. T: {FT name: float64 tensor} (full, as smoothquant_reference holds
    them); R: {gemm key: {"x": tensor}}; kv: {"model.layers.L.attention": (max |K|, max |V|)};
    stored(t, dtype) -> the numpy values a weight file of `dtype` holds."""
    out = {}
    for l in range(int(c["num_layer"])):
        gated = f"model.layers.{l}.{GATE}.weight" in T
        for gemm in GEMMS + ([GATE] if gated else []):
            key = f"model.layers.{l}.{gemm}"
            W = np.asarray(stored(T[key + ".weight"], dtype), dtype=np.float32)
            s_w = scale_of(np.abs(W).max())
            q = e4m3_codes(W / s_w)  # float32 / float32: the fp32 quotient
            x_of = f"model.layers.{l}.mlp.dense_h_to_4h" if gemm == GATE else key
            s_x = scale_of(float(np.asarray(R[x_of]["x"]).max()))
            # split like the weight: QKV per Q, K, V (grouped-query K/V heads split, multi-query's whole)
            for r in range(tp):
                out[f"{key}.weight.fp8.{r}.bin"] = np.ascontiguousarray(sqr.rank_part(key + ".weight", q, c, tp, r))
            out[f"{key}.weights_scaling_factor.bin"] = np.array([s_w], dtype=np.float32)
            out[f"{key}.activation_scaling_factor.bin"] = np.array([s_x], dtype=np.float32)
        k, v = kv[f"model.layers.{l}.attention"]
        out[f"model.layers.{l}.attention.kv_cache_scaling_factor.bin"] = np.array([scale_of(max(k, v))], np.float32)
    return out


def _f32(folder, name):
    return np.float32(np.fromfile(os.path.join(folder, name), np.float32)[0])


class Fp8Gemm:
    """One layer GEMM as FP8 computes it: y = gemm(x) (without the bias).

    Fp8Gemm.follow: None, or a function (gemm, v, q) -> q that may replace the E4M3 activations
    q = E4M3(v) of the unrounded v = x · (1/s_x) (a test takes the engine's rounding where the two
    lie on either side of a rounding boundary; the formulas here do not change)."""
    follow = None

    def __init__(self, q, s_x, s_w, name):
        self.q = q                                   # [K, N] E4M3 values, float64
        self.inv = float(np.float32(1.0) / s_x)      # the fp32 reciprocal
        self.alpha = float(np.float32(s_x) * np.float32(s_w))  # the fp32 product of the scales
        self.name = name                             # "LAYER.qkv" | ".dense" | ".fc1" | ".fc2"

    def __call__(self, x):
        v = x * self.inv
        qx = torch.from_numpy(e4m3_values(v.numpy()))
        if Fp8Gemm.follow is not None:
            qx = Fp8Gemm.follow(self, v, qx)
        return (qx @ self.q) * self.alpha


def fp8_model(folder):
    """Logical weights W for gpt_reference.forward with Fp8Gemm objects as the four layer GEMMs'
    weights, from the TP-1 `smoothquant --fp8` folder `folder`."""
    short = {"attention.query_key_value": "qkv", "attention.dense": "dense", "mlp.dense_h_to_4h": "fc1",
             "mlp.dense_h_to_4h.gate": "gate", "mlp.dense_4h_to_h": "fc2"}

    def layer_gemm(p, g, K, N, cols, row_parallel):
        codes = np.fromfile(os.path.join(folder, f"{p}{g}.weight.fp8.0.bin"), np.uint8).reshape(K, N)
        q = torch.from_numpy(codes[:, cols].copy().view(E4M3).astype(np.float64))
        return Fp8Gemm(q, _f32(folder, f"{p}{g}.activation_scaling_factor.bin"),
                       _f32(folder, f"{p}{g}.weights_scaling_factor.bin"), f"{p.split('.')[2]}.{short[g]}")

    return int8_reference.folder_model(folder, layer_gemm)[1]


def float_model(folder):
    """The folder's floating-point model (the FP8 KV cache alone keeps the GEMMs as they are)."""
    dtype = int8_reference._ini(folder)["weight_data_type"]

    def layer_gemm(p, g, K, N, cols, row_parallel):
        return int8_reference._read(folder, f"{p}{g}.weight.0.bin", (K, N), dtype)[:, cols]

    return int8_reference.folder_model(folder, layer_gemm)[1]


def fp8_linear(orig_lin):
    """gpt_reference._lin that runs Fp8Gemm weights (and others as before)."""
    return int8_reference.gemm_linear(orig_lin, Fp8Gemm)


class Fp8KvStore:
    """kv_store hook for gpt_reference.forward: the FP8 KV cache with each layer's
    kv_cache_scaling_factor. follow: None, or (layer, which ('k' | 'v'), v, q) -> q, as Fp8Gemm's."""

    def __init__(self, folder, layers):
        self.scales = [_f32(folder, f"model.layers.{l}.attention.kv_cache_scaling_factor.bin") for l in range(layers)]
        self.follow = None
        self._second = {}  # gpt_reference stores K then V of a layer: which one comes next

    def __call__(self, layer, t):
        which = "v" if self._second.get(layer) else "k"
        self._second[layer] = which == "k"
        s = self.scales[layer]
        v = t * float(np.float32(1.0) / s)
        q = torch.from_numpy(e4m3_values(v.numpy()))
        if self.follow is not None:
            q = self.follow(layer, which, v, q)
        return q * float(s)


def step_of(v):
    """The E4M3 quantisation step at each |v| (float64 array): 2^(e - 3) for a normal value of
    exponent e, 2^-9 below 2^-6 (distances to a rounding boundary are measured in these)."""
    a = np.maximum(np.abs(v), 2.0 ** -6)
    return np.exp2(np.floor(np.log2(a)) - 3)
