#pragma once
// SmoothQuant smoothing (TensorRT-LLM smoothquant.py `smooth_gemm`): per input
// channel j of a GEMM that reads a layernorm's output,
//   s_j = max|x_j|^α / max_i|W_ji|^(1−α), clamped at ≥ 1e-5 (max over the GEMM's output columns),
// the layernorm's γ and β divided by s, the GEMM's weight rows multiplied by s: LN(x)·W is
// unchanged, and the GEMM's input is flatter (easier to quantize per tensor).
//
// Which GEMMs (the rule that keeps the math exact: s may only be folded into a layernorm whose
// output feeds nothing but the smoothed GEMMs):
//  * sequential pre-LN blocks (GPT-2, Megatron, NeMo, OPT-pre, BLOOM, XGLM, NeoX without parallel
//    residual) and NeoX's parallel residual with two LNs: QKV ← input_layernorm, FC1 (and a gated
//    FFN's gate projection, jointly) ← post_attention_layernorm; attention.dense and FC2 have no
//    layernorm in front and keep s = 1;
//  * GPT-J (one layernorm shared by attention and FFN): QKV and FC1 read the same LN output, so they
//    get ONE s, computed from the max over both weights, folded into the shared γ, β once;
//  * post-LN blocks (OPT-post): a layernorm's output is the residual stream itself, so scaling it
//    would change the model: nothing is smoothed (s = 1), the ranges are exported as calibrated.
// All arithmetic is float64; smoothed tensors are rounded to fp32 (the host model's precision).
#include <string>
#include <vector>

#include "lib/quant/act_ranges.h"
#include "lib/quant/host_model.h"

namespace ftx::quant {

// A GEMM's ranges in float64, as the INT8 export consumes them.
struct QuantRange {
  std::vector<double> x, y, w;
};
std::map<std::string, QuantRange> to_quant_ranges(const ActRanges& r);

// Smooths `model` in place with `alpha` (0..1) and updates `ranges`: x ÷ s for every smoothed GEMM,
// w recomputed (max |W| per output column, not clipped) from the smoothed weights. Returns the
// number of GEMMs smoothed (0 for post-LN models).
int64_t smooth_model(HostModel& model, std::map<std::string, QuantRange>& ranges, double alpha);

}  // namespace ftx::quant
