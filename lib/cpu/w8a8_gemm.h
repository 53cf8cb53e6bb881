#pragma once
// SmoothQuant W8A8 GEMM on the CPU (int8_mode 2): the arithmetic defined at the end of
// lib/ops/op_types.h. Activations are quantised here (per tensor with the calibrated static scale,
// or per token), multiplied by the int8 weight in int32 (vnni_int8_gemm.h: AVX512-VNNI by hand on
// weights packed at load time), and the int32 sums scaled back to fp32. The quantize and
// dequantize steps are written here because oneDNN 2.6 (Debian 12) has no per-row (per-token)
// scales on a matmul's source or output, and its output scales would round the product of two
// scales differently from the definition. They are also the CPU twins of the CUDA kernels in
// kernels/quantization/.
#include <cstdint>
#include <vector>

#include "lib/cpu/vnni_int8_gemm.h"

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
// acc[M, N] = q_a[M, K] · q_w[K, N] in int32, both row-major: the twin of the CUDA backend's
// cuBLASLt int8 GEMM (packs q_w on every call; the backend packs its weights once).
void int8_matmul_s32(int64_t M, int64_t N, int64_t K, const int8_t* q_a, const int8_t* q_w, int32_t* acc);

// One W8A8 GEMM's input, quantised as its weight asks: act_scale > 0 per tensor (every row's
// factor is out_scale), else per token (row m's factor is its amax/127).
class W8A8Activations {
 public:
  void quantize(int64_t M, int64_t K, const float* A, float act_scale, float out_scale);
  VnniActivations operand() const { return {q_.data(), row_sum_.data(), M_, K_}; }
  float row_factor(int64_t m) const { return per_token_ ? alpha_row_[m] : out_scale_; }

 private:
  std::vector<int8_t> q_;  // [M, vnni_padded_k(K)], zero padded
  std::vector<int32_t> row_sum_;
  std::vector<float> alpha_row_;
  int64_t M_ = 0, K_ = 0;
  bool per_token_ = false;
  float out_scale_ = 1.0f;
};

// Output columns [n0, n0 + nn) of C[M, N] = dequantize(a · W) + beta·C on the calling thread; W is
// a [K, N] int8 matrix packed by pack_int8_vnni, alpha_col its per-column factors.
void w8a8_gemm_block(const W8A8Activations& a, const uint8_t* packed_w, int64_t N, const float* alpha_col, float* C,
                     float beta, int64_t n0, int64_t nn);

}  // namespace ftx::cpu
