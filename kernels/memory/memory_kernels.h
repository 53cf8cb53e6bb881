#pragma once
// Memory room: fills, scaling, conversions between fp32, fp16 and bf16, row copies (KV cache gathers).
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

namespace ftx::cuda {

// Backend::fill: dst[i] = value.
void invoke_fill(cudaStream_t stream, float* dst, float value, size_t n);
// x *= s for n elements held in `kind` (fp32, fp16 or bf16); s == 0 writes zeros, so NaN garbage in x
// does not survive, as BLAS with beta = 0.
void invoke_scale(cudaStream_t stream, void* x, ElemKind kind, float s, size_t n);
// dst[i] = src[i] converted from `from` to `to` (each fp32, fp16 or bf16): widening is exact,
// narrowing rounds to nearest even (a GEMM's activation operand; activations to and from the host).
// dst and src do not overlap unless equal with the same kind.
void invoke_convert(cudaStream_t stream, void* dst, ElemKind to, const void* src, ElemKind from, size_t n);

// Row copies of `row_bytes` bytes (any count: an int8 cache row can be odd), pair i: row to_idx ? to_idx[i] : i of to_base := source,
// where the source is row from_idx[i] of from_a when from_idx[i] >= 0, else row -from_idx[i] - 1 of
// from_b. The caller guarantees no pair reads a row another pair of the same launch writes.
// (Backend::gather_cache_rows.)
void invoke_copy_rows(cudaStream_t stream, void* to_base, const int32_t* to_idx, const void* from_a,
                      const void* from_b, const int32_t* from_idx, int64_t pairs, int64_t row_bytes);

}  // namespace ftx::cuda
