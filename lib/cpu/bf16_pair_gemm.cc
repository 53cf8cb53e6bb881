#include "lib/cpu/bf16_pair_gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/widening_gemm.h"

namespace ftx::cpu {

#if defined(__x86_64__)
namespace {

constexpr int64_t kStripCols = 64;  // 4 zmm of 16 lanes
constexpr int kTileRows = 6;        // 6 × 4 sums + 4 weight registers of the 32

// 16 weights from p (lanes past the mask read as zero) as bf16 bits in the low half of each 32-bit
// lane: bf16 weights as they are; int8 weights through fp32, which holds each value -128..127
// exactly with a zero low half, so its top half is the (exact) bf16 value.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i bf16_lanes(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i bf16_lanes(const int8_t* p, __mmask16 m) {
  return _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)))),
                           16);
}

// strip[p][j] = B(2p, j) | B(2p+1, j) << 16 as bf16 bits for j < w, zero beyond (zero weights add
// nothing); B holds bf16 (uint16_t) or int8 weights.
template <typename W>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pair_strip(int64_t K, const W* B, int64_t ldb, int64_t w,
                                                            uint32_t* strip) {
  for (int64_t p = 0; p < K / 2; ++p) {
    const W* even = B + 2 * p * ldb;
    const W* odd = even + ldb;
    uint32_t* out = strip + p * kStripCols;
    for (int64_t j = 0; j < kStripCols; j += 16) {
      const int64_t left = std::max<int64_t>(0, std::min<int64_t>(16, w - j));
      const auto m = static_cast<__mmask16>(left == 16 ? 0xFFFFu : (1u << left) - 1u);
      const __m512i lo = bf16_lanes(even + j, m), hi = bf16_lanes(odd + j, m);
      _mm512_storeu_si512(out + j, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

// R rows × C blocks of 16 columns, every sum in a register for the whole k loop. Flat arrays with
// the loops unrolled: GCC 12 keeps a two-dimensional array of sums in one scratch register and
// copies each in and out around every instruction (lib/cpu/vnni_int8_gemm.cc had that).
template <int R, int C>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pair_tile(int64_t pairs, const uint16_t* A, int64_t lda,
                                                                      const uint32_t* strip, const float* col_scale,
                                                                      float* out, int64_t ldo, __mmask16 last,
                                                                      float beta) {
  __m512 s[R * C];
#pragma GCC unroll 32
  for (int i = 0; i < R * C; ++i) s[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512i w[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) w[c] = _mm512_loadu_si512(strip + p * kStripCols + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      uint32_t two;
      std::memcpy(&two, A + r * lda + 2 * p, sizeof two);
      const __m512i a = _mm512_set1_epi32(static_cast<int>(two));
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) s[r * C + c] = _mm512_dpbf16_ps(s[r * C + c], (__m512bh)a, (__m512bh)w[c]);
    }
  }
  const __m512 b = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __mmask16 m = c + 1 < C ? __mmask16{0xFFFF} : last;
      float* o = out + r * ldo + 16 * c;
      __m512 v = s[r * C + c];
      if (col_scale) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, col_scale + 16 * c));
      if (beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(b, _mm512_maskz_loadu_ps(m, o)));
      _mm512_mask_storeu_ps(o, m, v);
    }
}

template <int R>
void tile_rows(int C, int64_t pairs, const uint16_t* A, int64_t lda, const uint32_t* strip, const float* col_scale,
               float* out, int64_t ldo, __mmask16 last, float beta) {
  switch (C) {
    case 1: return pair_tile<R, 1>(pairs, A, lda, strip, col_scale, out, ldo, last, beta);
    case 2: return pair_tile<R, 2>(pairs, A, lda, strip, col_scale, out, ldo, last, beta);
    case 3: return pair_tile<R, 3>(pairs, A, lda, strip, col_scale, out, ldo, last, beta);
    default: return pair_tile<R, 4>(pairs, A, lda, strip, col_scale, out, ldo, last, beta);
  }
}

// Columns [n0, n0 + nn) of C = A · B (· diag(scale)) + beta·C: each strip of 64 columns paired once,
// then every block of kTileRows rows of A over it.
template <typename Elem>
void pair_gemm_block(int64_t M, int64_t N, int64_t K, const uint16_t* A, const Elem* B, const float* scale,
                     int64_t panel_cols, float* C, float beta, int64_t n0, int64_t nn) {
  thread_local std::vector<uint32_t> strip;
  strip.resize(static_cast<size_t>(K / 2 * kStripCols));
  const int64_t end = n0 + nn;
  for (int64_t col = n0; col < end;) {
    const ColumnSegment seg = column_segment(B, sizeof(Elem), K, N, panel_cols, col);
    const int64_t w = std::min({kStripCols, seg.width, end - col});
    pair_strip(K, static_cast<const Elem*>(seg.start), seg.ld, w, strip.data());
    const int Cb = static_cast<int>((w + 15) / 16);
    const auto last = static_cast<__mmask16>(w % 16 == 0 ? 0xFFFFu : (1u << (w % 16)) - 1u);
    const float* s = scale ? scale + col : nullptr;
    for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
      const uint16_t* a = A + m0 * K;
      float* out = C + m0 * N + col;
      switch (std::min<int64_t>(kTileRows, M - m0)) {
        case 1: tile_rows<1>(Cb, K / 2, a, K, strip.data(), s, out, N, last, beta); break;
        case 2: tile_rows<2>(Cb, K / 2, a, K, strip.data(), s, out, N, last, beta); break;
        case 3: tile_rows<3>(Cb, K / 2, a, K, strip.data(), s, out, N, last, beta); break;
        case 4: tile_rows<4>(Cb, K / 2, a, K, strip.data(), s, out, N, last, beta); break;
        case 5: tile_rows<5>(Cb, K / 2, a, K, strip.data(), s, out, N, last, beta); break;
        default: tile_rows<6>(Cb, K / 2, a, K, strip.data(), s, out, N, last, beta); break;
      }
    }
    col += w;
  }
}

}  // namespace
#endif

bool bf16_pair_gemm_supported(int64_t K) { return K > 0 && K % 2 == 0 && has_avx512_bf16(); }

bool bf16_pair_gemm_preferred(int64_t K) { return !has_amx_bf16() && bf16_pair_gemm_supported(K); }

void bf16_pair_gemm_block(int64_t M, int64_t N, int64_t K, const uint16_t* A, const uint16_t* B, int64_t panel_cols, float* C,
                          float beta, int64_t n0, int64_t nn) {
  if (!bf16_pair_gemm_supported(K))
    throw Error("bf16_pair_gemm_block: needs AVX512-BF16 and an even K, got K = " + std::to_string(K));
  note_kernel_level(CpuIsa::kAvx512);
#if defined(__x86_64__)
  pair_gemm_block(M, N, K, A, B, nullptr, panel_cols, C, beta, n0, nn);
#endif
}

void int8_bf16_pair_gemm_block(int64_t M, int64_t N, int64_t K, const uint16_t* A, const int8_t* B, const float* scale,
                               int64_t panel_cols, float* C, float beta, int64_t n0, int64_t nn) {
  if (!bf16_pair_gemm_supported(K))
    throw Error("int8_bf16_pair_gemm_block: needs AVX512-BF16 and an even K, got K = " + std::to_string(K));
  note_kernel_level(CpuIsa::kAvx512);
#if defined(__x86_64__)
  pair_gemm_block(M, N, K, A, B, scale, panel_cols, C, beta, n0, nn);
#endif
}

}  // namespace ftx::cpu
