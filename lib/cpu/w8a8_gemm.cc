#include "lib/cpu/w8a8_gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>

#include "lib/cpu/cpu_features.h"
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

#if defined(__x86_64__)
// q[i] = to_int8_rne(x[i] · scale) sixteen at a time. NaN becomes 0 first; clamping to [-128, 127]
// before rounding gives what rounding then saturating gives (127.5 and above round to 128 and
// saturate to 127 either way), and leaves every value inside int32's range, where vcvtps2dq
// rounds half to even under the default MXCSR.
__attribute__((target("avx512f,avx512bw"))) void quantize_row_avx512(const float* x, int64_t n, float scale,
                                                                     int8_t* q) {
  note_kernel_level(CpuIsa::kAvx512);
  const __m512 s = _mm512_set1_ps(scale), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
  int64_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1u);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(q + i, m, _mm512_cvtps_epi32(v));
  }
}

// max |x[i]|, NaN ignored (std::max(amax, NaN) keeps amax; vmaxps returns its second operand
// when either is NaN).
__attribute__((target("avx512f"))) float abs_max_avx512(const float* x, int64_t n) {
  note_kernel_level(CpuIsa::kAvx512);
  __m512 amax = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1u);
    amax = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + i)), amax);
  }
  return _mm512_reduce_max_ps(amax);
}

// The same two at the AVX2 level, eight lanes at a time (the tail in scalar code, the same rule).
// vcvtps2dq and the packs saturate as the AVX-512 forms do; values are clamped first anyway.
__attribute__((target("avx2,fma,f16c"))) void quantize_row_avx2(const float* x, int64_t n, float scale, int8_t* q) {
  note_kernel_level(CpuIsa::kAvx2);
  const __m256 s = _mm256_set1_ps(scale), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));  // NaN -> 0
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i d = _mm256_cvtps_epi32(v);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(w, w));
  }
  for (; i < n; ++i) q[i] = to_int8_rne(x[i] * scale);
}

__attribute__((target("avx2,fma,f16c"))) float abs_max_avx2(const float* x, int64_t n) {
  note_kernel_level(CpuIsa::kAvx2);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), amax);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  float m = 0.0f;
  for (float v : lanes) m = std::max(m, v);
  for (; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}
#endif

void quantize_row(const float* x, int64_t n, float scale, int8_t* q) {
#if defined(__x86_64__)
  if (has_avx512_core()) return quantize_row_avx512(x, n, scale, q);
  if (has_avx2()) return quantize_row_avx2(x, n, scale, q);
#endif
  note_kernel_level(CpuIsa::kBaseline);
  for (int64_t i = 0; i < n; ++i) q[i] = to_int8_rne(x[i] * scale);
}

float abs_max(const float* x, int64_t n) {
#if defined(__x86_64__)
  if (has_avx512_core()) return abs_max_avx512(x, n);
  if (has_avx2()) return abs_max_avx2(x, n);
#endif
  note_kernel_level(CpuIsa::kBaseline);
  float amax = 0.0f;
  for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(x[k]));
  return amax;
}

// One row per token: amax/127 into *alpha, q = to_int8_rne(x · 127/amax).
void quantize_token(const float* row, int64_t K, int8_t* q, float* alpha) {
  const float amax = abs_max(row, K);
  quantize_row(row, K, 127.0f / amax, q);  // 127/0 = inf: every product is 0·inf = NaN -> 0
  *alpha = amax / 127.0f;
}

}  // namespace

void quantize_per_tensor(const float* x, int64_t n, float scale, int8_t* q) {
  constexpr int64_t kChunk = 16384;
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; i += kChunk) quantize_row(x + i, std::min(kChunk, n - i), scale, q + i);
}

void quantize_per_token(const float* x, int64_t M, int64_t K, int8_t* q, float* alpha_row) {
#pragma omp parallel for if (M * K > 65536)
  for (int64_t m = 0; m < M; ++m) quantize_token(x + m * K, K, q + m * K, alpha_row + m);
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
      quantize_token(A + m * K, K, q, alpha_row_.data() + m);
    else
      quantize_row(A + m * K, K, act_scale, q);
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
