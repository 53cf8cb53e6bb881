"""Float64 emulation of INT4 weight-only GEMM weights (`--weight-only-precision int4`), written from
the rules below (TensorRT-LLM's weight-only quantiser at 4 bits, GPTQ's and AWQ's asymmetric
round-to-nearest), not from ftx's code.

Each TP rank's GEMM matrix [in, out] is quantised group by group along the input dimension
(`group` rows; 0: the rank's whole input, one group per output column), every output column
alone:
  symmetric:    s = max|w| / 8 (1 when the column's group is all zero), q = round(w / s) (half away
                from zero) clamped to [-8, 7]; the GEMM multiplies by q · s;
  zero points:  lo = min(min w, 0), hi = max(max w, 0), s = (hi - lo) / 15 (1 when 0),
                z = clamp(round(-lo / s), 0, 15), u = clamp(round(w / s) + z, 0, 15); the GEMM
                multiplies by (u - z) · s.
The divisions run in fp32 on the fp32 values the engine loads; the products are float64.

Column-parallel matrices (QKV, FFN in, gate) keep whole columns on a rank, so TP does not change
them. Row-parallel ones (attention output, FFN out) are split by input rows: with a group that
divides a rank's rows the groups are the same at any TP; per column (group 0) each rank's block is
its own group, so the emulation quantises each of the `tp` row blocks alone.
"""
import copy

import torch


def _round_away(x):
    return torch.sign(x) * torch.floor(torch.abs(x) + 0.5)


def quantize_groups(w, group, zero_points):
    """w [in, out] (float64 holding fp32 values) -> the dequantised matrix, float64."""
    rows = w.shape[0]
    g = rows if group <= 0 or group >= rows else group
    out = torch.empty_like(w, dtype=torch.float64)
    for k0 in range(0, rows, g):
        b = w[k0:k0 + g].to(torch.float32)
        if zero_points:
            lo = torch.clamp(b.amin(dim=0), max=0.0)
            hi = torch.clamp(b.amax(dim=0), min=0.0)
            s = torch.where(hi - lo > 0, (hi - lo) / 15, torch.ones_like(hi))  # fp32 division
            z = torch.clamp(_round_away(-lo / s), 0, 15)
            u = torch.clamp(_round_away(b / s) + z, 0, 15)
            out[k0:k0 + g] = (u.to(torch.float64) - z.to(torch.float64)) * s.to(torch.float64)
        else:
            amax = b.abs().amax(dim=0)
            s = torch.where(amax > 0, amax / 8, torch.ones_like(amax))  # / 8 is exact in fp32
            q = torch.clamp(_round_away(b / s), -8, 7)
            out[k0:k0 + g] = q.to(torch.float64) * s.to(torch.float64)
    return out


def weight_only_int4(W, tp, group, zero_points=False):
    """The logical weights W (gpt_reference layout) as the INT4 GEMMs compute with them at TP `tp`."""
    Q = copy.copy(W)
    Q["layers"] = []
    for L in W["layers"]:
        L = dict(L)
        for k in ("wq", "wk", "wv", "w1", "wg"):
            if L.get(k) is not None:
                L[k] = quantize_groups(L[k], group, zero_points)
        for k in ("wo", "w2"):
            L[k] = torch.cat([quantize_groups(b, group, zero_points) for b in L[k].chunk(tp, dim=0)], dim=0)
        Q["layers"].append(L)
    return Q
