"""Float64 emulation of FasterTransformer's weight-only INT8 (int8_mode 1), from ft-runtime.md §4.1,
not from ftx's code.

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


def weight_only_int8(W, tp):
    """The logical weights W (gpt_reference layout) as FT's int8_mode 1 computes with them at TP `tp`."""
    Q = copy.copy(W)
    Q["layers"] = []
    for L in W["layers"]:
        L = dict(L)
        for k in ("wq", "wk", "wv", "w1", "wg"):
            if L.get(k) is not None:
                L[k] = quantize_columns(L[k])
        for k in ("wo", "w2"):
            L[k] = quantize_row_blocks(L[k], tp)
        Q["layers"].append(L)
    return Q
