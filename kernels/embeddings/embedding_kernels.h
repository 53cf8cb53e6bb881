#pragma once
// Embeddings room: token table lookup (fp32 or half table) plus the position term.
// Conventions of every launcher (all rooms): pointers are device pointers (index arrays included:
// the backend stages them first); a launcher enqueues on `stream`, returns at once, and checks the
// launch itself (not its execution); n == 0 / rows == 0 launch nothing. Semantics are those of the
// Backend method named in the comment (lib/ops/backend.h) and of its CPU twin (lib/cpu/), which
// tests/unit/cuda_backend_test.cc compares them against (label gpu). Launchers are named
// invoke_<what>, after FasterTransformer's invokeXxx, in this code base's snake case.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/elem_kind.h"
#include "lib/ops/op_types.h"

namespace ftx::cuda {

// Backend::embedding (table: where the position term comes from). wte is held in wte_kind.
// out is held in out_kind (the activations': fp32, fp16 or bf16).
void invoke_embedding_lookup(cudaStream_t stream, void* out, ElemKind out_kind, const void* wte, ElemKind wte_kind,
                             const float* wpe, ops::PositionTable table, int64_t position_offset, const int32_t* ids,
                             const int32_t* positions, int64_t rows, int64_t H, float scale);

}  // namespace ftx::cuda
