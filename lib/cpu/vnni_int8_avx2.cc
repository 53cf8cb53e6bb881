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

// Without VNNI: vpmaddwd multiplies pairs of int16 and adds each pair into an int32 lane, exactly
// for these values (a stored weight byte w + 128 is at most 255, an activation at least -128: a
// pair sums to at most 2·255·128 in size). Lane j of a 32-byte load holds column j's four bytes
// k0..k3; a mask keeps k0 and k2 as the lane's two int16, a shift by 8 bits leaves k1 and k3, and
// the activations are broadcast as the matching pairs (a0, a2) and (a1, a3): two vpmaddwd give each
// column its four products, summed in its own lane, with no horizontal step. Two multiplies per
// 32 products, where vpmaddubsw's nibble split needed four (vpmaddubsw saturates an int16 pair sum,
// so it can take a byte of the weights only 4 bits at a time); the same sums as vpdpbusd's.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace ftx::cpu::avx2 {
namespace {
struct PairDot {
  struct W {
    __m256i even, odd;  // (k0, k2) and (k1, k3) of each column, as int16
  };
  struct A {
    __m256i even, odd;  // (a0, a2) and (a1, a3), sign-extended to int16, in every lane
  };
  static constexpr int kWide = 2;  // one row: 4 blocks (4 sums, 8 weight vectors, 2 broadcasts)
  static inline W prepare(__m256i u) {
    return {_mm256_and_si256(u, _mm256_set1_epi16(0x00ff)), _mm256_srli_epi16(u, 8)};
  }
  static inline A broadcast(int32_t four) {
    const __m256i b = _mm256_set1_epi32(four);
    return {_mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), _mm256_srai_epi16(b, 8)};
  }
  static inline __m256i dot(__m256i s, const W& w, const A& a) {
    return _mm256_add_epi32(_mm256_add_epi32(s, _mm256_madd_epi16(w.even, a.even)), _mm256_madd_epi16(w.odd, a.odd));
  }
};
#define FTX_INT8_DOT_KERNELS_LEVEL
#include "lib/cpu/int8_dot_kernels.h"
#undef FTX_INT8_DOT_KERNELS_LEVEL
}  // namespace

int64_t int8_panel_product(const VnniActivations& a, const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols,
                           int32_t* acc, int64_t ldacc) {
  note_kernel_level(CpuIsa::kAvx2);
  return panel_product<PairDot>(a, w, ldw, j0, cols, acc, ldacc);
}
}  // namespace ftx::cpu::avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
namespace ftx::cpu::avx_vnni {
namespace {
struct VnniDot {
  using W = __m256i;
  using A = __m256i;
  static constexpr int kWide = 3;  // one row: 6 blocks (6 sums, 6 weights, a broadcast)
  static inline W prepare(__m256i u) { return u; }
  static inline A broadcast(int32_t four) { return _mm256_set1_epi32(four); }
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
