"""Float64 emulation of TensorRT-LLM's INT8 KV cache (`--int8_kv_cache`), from TensorRT-LLM's
weight.py and kernel facts, not from ftx's code.

Per layer, one scale for K and V: kv_quant_orig (the QKV GEMM's calibrated scale_y_quant_orig) and
kv_orig_quant = 1/kv_quant_orig, an fp32 value. Each K and V element is stored as
q = clamp(round_half_even(x · kv_orig_quant), -128, 127) (TensorRT-LLM converts with PTX
cvt.rni.sat.s8.f32) and read back, in context and decode attention alike, as q · kv_quant_orig.
Everything else is the float64 reference forward (gpt_reference.py, its `kv_store` hook: the K and V
of every position, after rotary, pass through `KvQuantizer`).

The engine computes x in fp32, the emulation in float64: an element whose x · kv_orig_quant lies
within a hair of a rounding boundary (n + 0.5) could round the other way. KvQuantizer records the
closest any element came (`closest`, in quantisation steps), so a fixture can pick scales that keep
every element clear of the boundaries.
"""
import torch


def fp32(v):
    return float(torch.tensor(v, dtype=torch.float32))


class KvQuantizer:
    """kv_store hook for gpt_reference.forward: per-layer scales (kv_quant_orig, fp32 values)."""

    def __init__(self, scales):
        self.scales = [fp32(s) for s in scales]
        self.inv = [fp32(1.0 / s) for s in self.scales]  # the fp32 reciprocal, as the engine computes it
        self.closest = float("inf")   # min |y - (n + 0.5)| over unsaturated elements, in steps
        self.saturated = 0            # elements clamped to -128 or 127

    def __call__(self, layer, x):
        y = x * self.inv[layer]
        frac = torch.abs(y - torch.floor(y) - 0.5)
        inside = (y > -128.5) & (y < 127.5)
        if bool(inside.any()):
            self.closest = min(self.closest, float(frac[inside].min()))
        q = torch.clamp(torch.round(y), -128, 127)  # torch.round: half to even
        self.saturated += int((q != torch.round(y)).sum())
        return q * self.scales[layer]


class KvRecorder:
    """kv_store hook that quantises like KvQuantizer and records the unquantised K and V elements
    of one layer (for choosing that layer's scale)."""

    def __init__(self, scales, layer):
        self.quant = KvQuantizer(scales)
        self.layer = layer
        self.values = []

    def __call__(self, layer, x):
        if layer == self.layer:
            self.values.append(x.reshape(-1))
        return self.quant(layer, x)


def clear_scale(values, base, margin, gen, tries=200, batch=256, spread=0.05):
    """A scale s near `base` (s = base · (1 + spread · u), u uniform in [0, 1); base itself first)
    such that every value x with |x / s| < 127.5 lies at least `margin` steps from a rounding
    boundary (n + 0.5 steps). None when no candidate does."""
    x = torch.cat(values).to(torch.float64)
    for t in range(tries):
        u = torch.rand(batch, generator=gen, dtype=torch.float64)
        if t == 0:
            u[0] = 0.0
        cand = (base * (1.0 + spread * u)).to(torch.float32).to(torch.float64)
        inv = (1.0 / cand).to(torch.float32).to(torch.float64)
        y = x[None, :] * inv[:, None]
        dist = torch.abs(y - torch.floor(y) - 0.5)
        dist = torch.where(torch.abs(y) < 127.5, dist, torch.ones_like(dist))
        ok = dist.min(dim=1).values >= margin
        if bool(ok.any()):
            return float(cand[int(torch.nonzero(ok)[0])])
    return None


class KvRange:
    """kv_store hook that changes nothing and records max |K|, |V| per layer (for choosing scales)."""

    def __init__(self, layers):
        self.amax = [0.0] * layers

    def __call__(self, layer, x):
        self.amax[layer] = max(self.amax[layer], float(x.abs().max()))
        return x
