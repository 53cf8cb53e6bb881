#pragma once
// Weight-only INT8 GEMM on the CPU (FT's int8_mode 1): C = A · (q · diag(scale)) with fp32
// activations, int8 weights and fp32 sums.
//
// Written by hand because the libraries at hand cannot do it: OpenBLAS has no int8 operand, and
// oneDNN 2.6 (Debian 12) multiplies int8 weights only against int8 activations (W8A8), with no
// weight decompression. The weights are what a decode step reads, so reading 1 byte per weight
// instead of 4 is the point; the arithmetic stays fp32.
#include <cstdint>

namespace ftx::cpu {

// Output columns [n0, n0 + nn) of C[M, N] = A[M, K] · q[K, N]·diag(scale[N]) + beta·C, on the
// calling thread: the widening kernels of widening_gemm.h (shared with fp16/bf16 weights).
// panel_cols: q row-major (0) or in column panels of that width (widening_gemm.h pack_column_panels).
void int8_weight_gemm_block(int64_t M, int64_t N, int64_t K, const float* A, const int8_t* q, const float* scale,
                            float* C, float beta, int64_t n0, int64_t nn, int64_t panel_cols = 0);

}  // namespace ftx::cpu
