#pragma once
// MoE room: the device steps of Backend::moe_ffn (lib/ops/backend.h) around its GEMMs, which the
// backend runs through its own gemm (kernels/cuda_backend/cuda_moe.cc). Launcher conventions as in
// kernels/memory/memory_kernels.h. A slot is one (row, choice) pair, s = row · top_k + k.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/elem_kind.h"

namespace ftx::cuda {

// Step 2, lib/cpu/moe_ffn.h's moe_route for each of `rows` rows of fp32 `logits` [rows, experts]:
// softmax with the exponentials (of l - max, in double) summed in double, in expert order; the
// top_k largest p, descending, equal p the lower expert first; renorm: each p divided in fp32 by
// their sum taken in double, in choice order. Writes expert[s] and weight[s] for every slot.
void invoke_moe_route(cudaStream_t stream, const float* logits, int64_t rows, int64_t experts, int64_t top_k,
                      bool renorm, int32_t* expert, float* weight);

// The slots grouped by expert (a stable counting sort: within an expert, slot order): offsets
// [experts + 1] (expert e's slots are positions offsets[e] .. offsets[e + 1] - 1), src_row[p] the
// input row of the slot at position p, pos[s] the position of slot s.
void invoke_moe_sort(cudaStream_t stream, const int32_t* expert, int64_t slots, int64_t top_k, int64_t experts,
                     int32_t* offsets, int32_t* src_row, int32_t* pos);

// Step 4: out[r][h] = Σ_k weight[r·top_k + k] · y[pos[r·top_k + k]][h] in fp32 from 0, in k order
// (each product rounded, then added: the CPU's loop), stored in `out_kind`; y fp32 [slots, H].
void invoke_moe_combine(cudaStream_t stream, void* out, ElemKind out_kind, const float* y, const float* weight,
                        const int32_t* pos, int64_t rows, int64_t top_k, int64_t H);

}  // namespace ftx::cuda
