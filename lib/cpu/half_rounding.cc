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
  note_kernel_level(CpuIsa::kAvx512);
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
  note_kernel_level(CpuIsa::kAvx512);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i b = bf16_bits(_mm512_maskz_loadu_ps(m, src + i));
    _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void to_bf16_avx512(const float* src, size_t n, uint16_t* dst) {
  note_kernel_level(CpuIsa::kAvx512);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(bf16_bits(_mm512_maskz_loadu_ps(m, src + i))));
  }
}

// The same three at the AVX2 level, eight lanes at a time; the last n % 8 elements in scalar code
// (the same rule).
__attribute__((target("avx2,fma,f16c"))) void fp16_avx2(const float* src, size_t n, float* dst) {
  note_kernel_level(CpuIsa::kAvx2);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = half_to_float(float_to_half(src[i]));
}

__attribute__((target("avx2,fma,f16c"))) inline __m256i bf16_bits_avx2(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  // |x| > inf's bits, as signed 32-bit integers (|x| < 2^31).
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

__attribute__((target("avx2,fma,f16c"))) void bf16_round_avx2(const float* src, size_t n, float* dst) {
  note_kernel_level(CpuIsa::kAvx2);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits_avx2(_mm256_loadu_ps(src + i)), 16)));
  for (; i < n; ++i) dst[i] = bf16_to_float(float_to_bf16(src[i]));
}

__attribute__((target("avx2,fma,f16c"))) void to_bf16_avx2(const float* src, size_t n, uint16_t* dst) {
  note_kernel_level(CpuIsa::kAvx2);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // packus works within 128-bit halves: lanes 0-3 8-11 4-7 12-15, put in order by the permute.
    const __m256i lo = bf16_bits_avx2(_mm256_loadu_ps(src + i)), hi = bf16_bits_avx2(_mm256_loadu_ps(src + i + 8));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}
#endif

}  // namespace

void round_through_fp16(const float* src, size_t n, float* dst) {
#if defined(__x86_64__)
  if (has_avx512_core()) return fp16_avx512(src, n, dst);
  if (has_avx2()) return fp16_avx2(src, n, dst);
#endif
  note_kernel_level(CpuIsa::kBaseline);
  for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(float_to_half(src[i]));
}

void round_through_bf16(const float* src, size_t n, float* dst) {
#if defined(__x86_64__)
  if (has_avx512_core()) return bf16_round_avx512(src, n, dst);
  if (has_avx2()) return bf16_round_avx2(src, n, dst);
#endif
  note_kernel_level(CpuIsa::kBaseline);
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(float_to_bf16(src[i]));
}

void to_bf16(const float* src, size_t n, uint16_t* dst) {
#if defined(__x86_64__)
  if (has_avx512_core()) return to_bf16_avx512(src, n, dst);
  if (has_avx2()) return to_bf16_avx2(src, n, dst);
#endif
  note_kernel_level(CpuIsa::kBaseline);
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

}  // namespace ftx::cpu
