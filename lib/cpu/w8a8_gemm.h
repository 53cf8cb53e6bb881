#pragma once
// SmoothQuant W8A8 GEMM on the CPU (int8_mode 2): the arithmetic defined at the end of
// lib/ops/backend.h, with the int8 × int8 → int32 product from oneDNN's matmul (AVX512-VNNI /
// AMX-INT8 where the CPU has them). The quantize and dequantize steps are written here: oneDNN 2.6
// (Debian 12) has no per-row (per-token) scales on a matmul's source or output, and its output
// scales would round the product of two scales differently from the definition. They are also
// the CPU twins of the CUDA kernels in kernels/quantization/.
#include <cstdint>

namespace ftx::cpu {

// q[i] = sat(rint(x[i] · scale)) for i < n (per-tensor, static scale).
void quantize_per_tensor(const float* x, int64_t n, float scale, int8_t* q);
// Row m of x[M, K]: amax = max |x[m]|, q[m] = sat(rint(x[m] · (127/amax))), alpha_row[m] = amax/127
// (amax 0: q = 0, alpha_row = 0).
void quantize_per_token(const float* x, int64_t M, int64_t K, int8_t* q, float* alpha_row);
// C[m][n] = float(acc[m][n]) · (alpha_row[m] · alpha_col[n]) + beta · C[m][n]; alpha_row null:
// every row's factor is row_scale.
void dequantize_int32(const int32_t* acc, int64_t M, int64_t N, const float* alpha_row, float row_scale,
                      const float* alpha_col, float* C, float beta);
// acc[M, N] = q_a[M, K] · q_w[K, N] in int32 (row-major, oneDNN matmul; one primitive per (N, K)).
void int8_matmul_s32(int64_t M, int64_t N, int64_t K, const int8_t* q_a, const int8_t* q_w, int32_t* acc);

// The whole W8A8 GEMM: act_scale > 0 per-tensor (alpha_row = out_scale), else per-token.
void w8a8_gemm(int64_t M, int64_t N, int64_t K, const float* A, const int8_t* q_w, const float* alpha_col,
               float act_scale, float out_scale, float* C, float beta);

}  // namespace ftx::cpu
