#pragma once
// Quantisation room: INT8 weights (FT's int8_mode 1) and SmoothQuant W8A8's activation quantisation
// and int32 dequantisation (int8_mode 2, the arithmetic defined at the end of lib/ops/op_types.h).
// Launcher conventions as in kernels/memory/memory_kernels.h.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/elem_kind.h"

namespace ftx::cuda {

// dst[k][n] = q[k][n] · scale[n] for a [K, N] int8 matrix, stored in `kind`; scale null: q[k][n]
// itself (exact in fp32, fp16 and bf16), which the weight-only GEMM multiplies before applying the
// scales to its fp32 sums (invoke_scale_columns). CPU twin: lib/cpu/int8_gemm.cc (which never
// materialises the widened matrix, but multiplies by the same values).
void invoke_dequantize_int8_columns(cudaStream_t stream, void* dst, ElemKind kind, const int8_t* q,
                                    const float* scale, int64_t K, int64_t N);
// C[m][n] = acc[m][n] · scale[n] + beta · C[m][n] in fp32, rounded once to C's kind (fp32, fp16 or
// bf16): the per-column scales of weight-only INT8 on the GEMM's fp32 sums, (A' · q) · diag(scale)
// (Backend::gemm, lib/ops/backend.h). CPU twin: the scale step of lib/cpu/int8_gemm.cc.

// q[i] = sat(rint(x[i] · scale)) (round half to even, [-128, 127]). CPU twin:
// cpu::quantize_per_tensor (lib/cpu/w8a8_gemm.h).
// x (and x_kind): the activations, fp32, fp16 or bf16.
void invoke_scale_columns(cudaStream_t stream, void* C, ElemKind c_kind, const float* acc, const float* scale,
                          int64_t M, int64_t N, float beta);

void invoke_quantize_per_tensor(cudaStream_t stream, int8_t* q, const void* x, ElemKind x_kind, int64_t n,
                                float scale);
// Row m of x[M, K]: amax = max|x[m]|, q[m] = sat(rint(x[m] · (127/amax))), alpha_row[m] = amax/127
// (amax 0: zeros). One block per row. CPU twin: cpu::quantize_per_token.
void invoke_quantize_per_token(cudaStream_t stream, int8_t* q, float* alpha_row, const void* x, ElemKind x_kind,
                               int64_t M, int64_t K);
// C[m][n] = float(acc[m][n]) · (alpha_row[m] · alpha_col[n]) + beta · C[m][n]; alpha_row null:
// row_scale for every row; C held in c_kind (rounded once). CPU twin: cpu::dequantize_int32.
void invoke_dequantize_int32(cudaStream_t stream, void* C, ElemKind c_kind, const int32_t* acc, int64_t M, int64_t N,
                             const float* alpha_row, float row_scale, const float* alpha_col, float beta);

}  // namespace ftx::cuda
