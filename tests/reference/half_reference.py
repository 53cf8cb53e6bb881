"""Float64 emulation of GEMMs with fp16/bf16 weights and fp32 sums, written from the Backend
contract (lib/ops/backend.h: "a half-precision B means: A rounded to B's dtype, products summed in
fp32") and FasterTransformer's practice of holding a half model's weights in half, not from ftx's
code.

  * The weight matrices (each layer's QKV, attention output, FFN in/gate/out, the embedding table
    and lm_head) are rounded to the dtype (round to nearest even) from the fp32 values the engine
    loads; norms, biases and the position table stay as loaded.
  * At each product with such a matrix the activation operand is rounded to the dtype (from fp32,
    as an fp32 engine holds it); the products and their sums are float64 (a half times a half is
    exact in fp32, so only the sums differ from an fp32 engine, by fp32 rounding).
  * Everything else (norms, attention, activations) is the float64 reference of gpt_reference.py.

With weight-only INT8 (int8_mode 1) and a half dtype, FT keeps the layer matrices int8
(int8_reference.py: q · scale, exact in float64) and the embedding table and lm_head in half:
half_weights(..., layers=False). Its weight-only GEMMs take the model's half activations, so the
activation operand is rounded at the 'layer' products as at the 'head' one (lib/ops/backend.h,
Weight::input_dtype).
"""
import copy

import torch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
LAYER_MATRICES = ("wq", "wk", "wv", "wo", "w1", "wg", "w2")


def rounded(t, dtype):
    """t (float64) through fp32 to `dtype` (nearest even) and back to float64."""
    return t.to(torch.float32).to(DTYPES[dtype]).to(torch.float64)


def half_weights(W, dtype, layers=True):
    """W (gpt_reference layout) with the matrices a half-precision engine holds rounded to `dtype`:
    wte, lm_head and, when `layers`, every layer's GEMM matrices."""
    H = copy.copy(W)
    H["wte"] = rounded(W["wte"], dtype)
    if W.get("lm_head") is not None:
        H["lm_head"] = rounded(W["lm_head"], dtype)
    if layers:
        H["layers"] = [{k: (rounded(v, dtype) if k in LAYER_MATRICES and v is not None else v) for k, v in L.items()}
                       for L in W["layers"]]
    return H


def half_cfg(cfg, dtype, kinds=("layer", "head", "project")):
    """cfg whose weight products of the given kinds round the activation operand to `dtype`."""
    def gemm(x, w, kind):
        return (rounded(x, dtype) if kind in kinds else x) @ w
    return dict(cfg, gemm=gemm)
