#pragma once
// The CPU backend's mixture-of-experts layer (Backend::moe_ffn, lib/ops/backend.h): the router's
// GEMM, the routing of each row in fp32, the rows grouped by expert so that each expert's three
// GEMMs run once over all its rows (its weights read once per call, however many rows chose it),
// and the weighted sum of each row's expert outputs in the order of its choices; then a shared
// expert's output, weighed by its sigmoid gate, added.
#include <cstdint>

#include "lib/model/blocks.h"
#include "lib/ops/op_types.h"

namespace ftx::cpu {

class CpuBackend;

// One of a row's chosen experts and its weight.
struct MoeChoice {
  int32_t expert = 0;
  float weight = 0.0f;
};

// Step 2 of Backend::moe_ffn for one row: `logits` [experts] to `out` [top_k], in descending order
// of probability (equal ones: the lower expert first).
void moe_route(const float* logits, int64_t experts, int64_t top_k, MoeRouting routing, MoeChoice* out);

// Backend::moe_ffn with `be`'s GEMMs and activation; out and in are fp32 [rows, layer.hidden].
void moe_ffn(CpuBackend& be, float* out, const float* in, int64_t rows, const ops::MoeLayer& layer);

}  // namespace ftx::cpu
