#include "lib/cpu/w8a8_gemm.h"

#include <algorithm>
#include <cmath>

#include "lib/cpu/widening_gemm.h"

namespace ftx::cpu {

namespace {

// Round half to even and saturate to [-128, 127]: cvt.rni.sat.s8.f32. std::nearbyint rounds half
// to even under the default rounding mode; NaN (0 · inf) becomes 0 as the PTX instruction makes it.
inline int8_t to_int8_rne(float v) {
  if (std::isnan(v)) return 0;
  const float r = std::nearbyint(v);
  return static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, r)));
}

// One output row: c[n] = float(acc[n]) · (row_factor · alpha_col[n]) + beta · c[n].
inline void dequantize_row(const int32_t* acc, int64_t n, float row_factor, const float* alpha_col, float* c,
                           float beta) {
  for (int64_t j = 0; j < n; ++j) {
    const float y = static_cast<float>(acc[j]) * (row_factor * alpha_col[j]);
    c[j] = beta == 0.0f ? y : y + beta * c[j];
  }
}

}  // namespace

void quantize_per_tensor(const float* x, int64_t n, float scale, int8_t* q) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) q[i] = to_int8_rne(x[i] * scale);
}

void quantize_per_token(const float* x, int64_t M, int64_t K, int8_t* q, float* alpha_row) {
#pragma omp parallel for if (M * K > 65536)
  for (int64_t m = 0; m < M; ++m) {
    const float* row = x + m * K;
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
    const float s = 127.0f / amax;  // inf when amax is 0: every product is 0·inf = NaN -> 0
    for (int64_t k = 0; k < K; ++k) q[m * K + k] = to_int8_rne(row[k] * s);
    alpha_row[m] = amax / 127.0f;
  }
}

void dequantize_int32(const int32_t* acc, int64_t M, int64_t N, const float* alpha_row, float row_scale,
                      const float* alpha_col, float* C, float beta) {
#pragma omp parallel for if (M * N > 65536)
  for (int64_t m = 0; m < M; ++m)
    dequantize_row(acc + m * N, N, alpha_row ? alpha_row[m] : row_scale, alpha_col, C + m * N, beta);
}

void int8_matmul_s32(int64_t M, int64_t N, int64_t K, const int8_t* q_a, const int8_t* q_w, int32_t* acc) {
  std::vector<uint8_t> packed(vnni_packed_bytes(K, N));
  pack_int8_vnni(q_w, K, N, packed.data());
  const int64_t K4 = vnni_padded_k(K);
  std::vector<int8_t> a(static_cast<size_t>(M * K4), 0);
  std::vector<int32_t> sums(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      a[m * K4 + k] = q_a[m * K + k];
      sums[m] += q_a[m * K + k];
    }
  vnni_int8_product({a.data(), sums.data(), M, K}, packed.data(), N, 0, N, acc);
}

void W8A8Activations::quantize(int64_t M, int64_t K, const float* A, float act_scale, float out_scale) {
  const int64_t K4 = vnni_padded_k(K);
  M_ = M;
  K_ = K;
  per_token_ = !(act_scale > 0.0f);
  out_scale_ = out_scale;
  q_.assign(static_cast<size_t>(M * K4), 0);
  row_sum_.resize(static_cast<size_t>(M));
  alpha_row_.resize(static_cast<size_t>(per_token_ ? M : 0));
#pragma omp parallel for if (M * K > 65536)
  for (int64_t m = 0; m < M; ++m) {
    int8_t* q = q_.data() + m * K4;
    if (per_token_)
      quantize_per_token(A + m * K, 1, K, q, alpha_row_.data() + m);
    else
      quantize_per_tensor(A + m * K, K, act_scale, q);
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += q[k];
    row_sum_[m] = s;
  }
}

void w8a8_gemm_block(const W8A8Activations& a, const uint8_t* packed_w, int64_t N, const float* alpha_col, float* C,
                     float beta, int64_t n0, int64_t nn) {
  // A panel's width at a time: the int32 sums of the M rows stay in L1 until they are scaled.
  thread_local std::vector<int32_t> acc;
  const VnniActivations op = a.operand();
  for (int64_t col = n0; col < n0 + nn;) {
    const int64_t cn = std::min(kWideningPanelCols - col % kWideningPanelCols, n0 + nn - col);
    acc.resize(static_cast<size_t>(op.M * cn));
    vnni_int8_product(op, packed_w, N, col, cn, acc.data());
    for (int64_t m = 0; m < op.M; ++m)
      dequantize_row(acc.data() + m * cn, cn, a.row_factor(m), alpha_col + col, C + m * N + col, beta);
    col += cn;
  }
}

}  // namespace ftx::cpu
