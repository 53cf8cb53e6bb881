#pragma once
// Quantisation room: INT8 weights (FT's int8_mode 1). Launcher conventions as in
// kernels/memory/memory_kernels.h.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/elem_kind.h"

namespace ftx::cuda {

// dst[k][n] = q[k][n] · scale[n] for a [K, N] int8 matrix, stored in `kind`: the weight-only GEMM
// then reads an ordinary fp32/fp16/bf16 operand. CPU twin: lib/cpu/int8_gemm.cc (which never
// materialises the widened matrix, but multiplies by the same values).
void invoke_dequantize_int8_columns(cudaStream_t stream, void* dst, ElemKind kind, const int8_t* q,
                                    const float* scale, int64_t K, int64_t N);

}  // namespace ftx::cuda
