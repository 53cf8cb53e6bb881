#include "lib/cpu/half_rounding.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "formats/dtype.h"
#include "lib/cpu/cpu_features.h"

namespace ftx::cpu {

namespace {

#if defined(__x86_64__)
inline __mmask16 tail_mask(size_t left) {
  return left >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1u);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void fp16_avx512(const float* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(h));
  }
}

// The top 16 bits of each lane after rounding to nearest even; NaN keeps its top bits and is made
// quiet (float_to_bf16's rule).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i bf16_bits(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(rounded, nan, quiet);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void bf16_round_avx512(const float* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i b = bf16_bits(_mm512_maskz_loadu_ps(m, src + i));
    _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void to_bf16_avx512(const float* src, size_t n, uint16_t* dst) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(bf16_bits(_mm512_maskz_loadu_ps(m, src + i))));
  }
}
#endif

}  // namespace

void round_through_fp16(const float* src, size_t n, float* dst) {
#if defined(__x86_64__)
  if (has_avx512_core()) return fp16_avx512(src, n, dst);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(float_to_half(src[i]));
}

void round_through_bf16(const float* src, size_t n, float* dst) {
#if defined(__x86_64__)
  if (has_avx512_core()) return bf16_round_avx512(src, n, dst);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(float_to_bf16(src[i]));
}

void to_bf16(const float* src, size_t n, uint16_t* dst) {
#if defined(__x86_64__)
  if (has_avx512_core()) return to_bf16_avx512(src, n, dst);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

}  // namespace ftx::cpu
