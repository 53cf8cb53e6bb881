// The W8A8 int8 product at the AVX2 level (int8_dot_kernels.h), with AVX-VNNI's 256-bit vpdpbusd
// and without it.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "lib/cpu/row_prefetch.h"
#include "lib/cpu/vnni_int8_gemm.h"
#include "lib/cpu/vnni_int8_levels.h"

#if defined(__x86_64__)
#include <immintrin.h>

// Without VNNI: vpmaddubsw multiplies unsigned by signed bytes and adds pairs into int16 with
// saturation, which a stored weight byte (w + 128, up to 255) times an activation (down to -128)
// would overflow. Each weight byte is split into its nibbles, u = 16·hi + lo: a pair of nibble
// products is at most 2·15·128 in size, and vpmaddwd then adds each two pairs into int32 with the
// factor 16 or 1. Exact: the same sums as vpdpbusd's.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace ftx::cpu::avx2 {
namespace {
struct NibbleDot {
  struct W {
    __m256i hi, lo;
  };
  static constexpr int kWide = 2;  // one row: 4 blocks (8 sums, 8 nibble vectors, 4 constants)
  static inline W prepare(__m256i u) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    return {_mm256_and_si256(_mm256_srli_epi16(u, 4), low4), _mm256_and_si256(u, low4)};
  }
  static inline __m256i dot(__m256i s, W w, __m256i a) {
    const __m256i hi = _mm256_madd_epi16(_mm256_maddubs_epi16(w.hi, a), _mm256_set1_epi16(16));
    const __m256i lo = _mm256_madd_epi16(_mm256_maddubs_epi16(w.lo, a), _mm256_set1_epi16(1));
    return _mm256_add_epi32(s, _mm256_add_epi32(hi, lo));
  }
};
#define FTX_INT8_DOT_KERNELS_LEVEL
#include "lib/cpu/int8_dot_kernels.h"
#undef FTX_INT8_DOT_KERNELS_LEVEL
}  // namespace

int64_t int8_panel_product(const VnniActivations& a, const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols,
                           int32_t* acc, int64_t ldacc) {
  note_kernel_level(CpuIsa::kAvx2);
  return panel_product<NibbleDot>(a, w, ldw, j0, cols, acc, ldacc);
}
}  // namespace ftx::cpu::avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
namespace ftx::cpu::avx_vnni {
namespace {
struct VnniDot {
  using W = __m256i;
  static constexpr int kWide = 3;  // one row: 6 blocks (6 sums, 6 weights, a broadcast)
  static inline W prepare(__m256i u) { return u; }
  static inline __m256i dot(__m256i s, W w, __m256i a) { return _mm256_dpbusd_avx_epi32(s, w, a); }
};
#define FTX_INT8_DOT_KERNELS_LEVEL
#include "lib/cpu/int8_dot_kernels.h"
#undef FTX_INT8_DOT_KERNELS_LEVEL
}  // namespace

int64_t int8_panel_product(const VnniActivations& a, const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols,
                           int32_t* acc, int64_t ldacc) {
  note_kernel_level(CpuIsa::kAvx2);
  return panel_product<VnniDot>(a, w, ldw, j0, cols, acc, ldacc);
}
}  // namespace ftx::cpu::avx_vnni
#pragma GCC pop_options
#endif
