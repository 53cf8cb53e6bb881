// The widening GEMM kernels (widening_kernels.h) compiled for AVX-512, and the AVX512-BF16 kernel
// for a bf16 B transposed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "lib/cpu/cpu_features.h"
#include "lib/cpu/half_rounding.h"
#include "lib/cpu/narrow_type.h"
#include "lib/cpu/row_prefetch.h"
#include "lib/cpu/simd_vec.h"
#include "lib/cpu/widening_levels.h"

#if defined(__x86_64__)
namespace ftx::cpu::avx512 {

namespace {

// bf16 B transposed ([N, K]: an embedding table as lm_head, read row by row) on AVX512-BF16:
// vdpbf16ps multiplies 32 bf16 pairs of an A row and a B row per instruction and adds each
// adjacent pair of products into an fp32 lane (products exact, sums fp32), so a 64-byte line of
// B costs one instruction instead of two widenings and two FMAs. A16: the R rows of A in bf16.
// One B row at a time (a single sequential stream, as stream_rows_trans), four accumulators per A
// row over consecutive 32-element steps.
template <int R>
__attribute__((target("avx512f,avx512bf16"))) void stream_rows_trans_dpbf16(int64_t K, const uint16_t* A16,
                                                                          const uint16_t* B, int64_t ldb,
                                                                          int64_t nn, float* acc, int64_t ldacc) {
  const int64_t k128 = K / 128 * 128, k32 = K / 32 * 32;
  for (int64_t j = 0; j < nn; ++j) {
    const uint16_t* row = B + j * ldb;
    __m512 s[R][4];
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < 4; ++u) s[r][u] = _mm512_setzero_ps();
    for (int64_t k = 0; k < k128; k += 128)
      for (int u = 0; u < 4; ++u) {
        const __m512bh w = (__m512bh)_mm512_loadu_si512(row + k + 32 * u);
        for (int r = 0; r < R; ++r)
          s[r][u] = _mm512_dpbf16_ps(s[r][u], (__m512bh)_mm512_loadu_si512(A16 + r * K + k + 32 * u), w);
      }
    for (int64_t k = k128; k < k32; k += 32) {
      const __m512bh w = (__m512bh)_mm512_loadu_si512(row + k);
      for (int r = 0; r < R; ++r)
        s[r][0] = _mm512_dpbf16_ps(s[r][0], (__m512bh)_mm512_loadu_si512(A16 + r * K + k), w);
    }
    for (int r = 0; r < R; ++r) {
      float t = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[r][0], s[r][1]), _mm512_add_ps(s[r][2], s[r][3])));
      for (int64_t k = k32; k < K; ++k) t = std::fma(bf16_to_float(A16[r * K + k]), bf16_to_float(row[k]), t);
      acc[r * ldacc + j] = t;
    }
  }
}

// A's rows rounded to bf16 (exact when the caller rounded them already, as the CPU backend does).
void trans_bf16_dpbf16(int64_t M, int64_t K, const float* A, const void* B, int64_t ldb, int64_t nn, float* acc) {
  thread_local std::vector<uint16_t> a16;
  a16.resize(static_cast<size_t>(M * K));
  to_bf16(A, static_cast<size_t>(M * K), a16.data());
  const auto* b = static_cast<const uint16_t*>(B);
  // Blocks of B rows that stay in cache while every group of four A rows passes over them.
  const int64_t block = M <= 4 ? nn : 16;
  for (int64_t j = 0; j < nn; j += block) {
    const int64_t jn = std::min(block, nn - j);
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const uint16_t* a = a16.data() + m0 * K;
      float* out = acc + m0 * nn + j;
      switch (std::min<int64_t>(4, M - m0)) {
        case 1: stream_rows_trans_dpbf16<1>(K, a, b + j * ldb, ldb, jn, out, nn); break;
        case 2: stream_rows_trans_dpbf16<2>(K, a, b + j * ldb, ldb, jn, out, nn); break;
        case 3: stream_rows_trans_dpbf16<3>(K, a, b + j * ldb, ldb, jn, out, nn); break;
        default: stream_rows_trans_dpbf16<4>(K, a, b + j * ldb, ldb, jn, out, nn); break;
      }
    }
  }
}

}  // namespace

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace {
using simd::Avx512;
#define FTX_WIDENING_KERNELS_LEVEL
#include "lib/cpu/widening_kernels.h"
#undef FTX_WIDENING_KERNELS_LEVEL
}  // namespace

int64_t widening_scratch_floats(int64_t, int64_t K) { return tile_chunk_floats<Avx512>(K); }

#pragma GCC pop_options

void widening_block(NarrowType type, int64_t M, int64_t K, const float* A, const void* B, int64_t ldb, bool trans,
                    int64_t nn, float* acc, float* chunk) {
  note_kernel_level(CpuIsa::kAvx512);
  if (type == NarrowType::kBf16 && trans && has_avx512_bf16()) return trans_bf16_dpbf16(M, K, A, B, ldb, nn, acc);
  with_narrow(type, [&](auto e) {
    using E = decltype(e);
    if (M > Shapes<Avx512>::kMaxStreamRows && !trans) return tile_block<Avx512, E>(M, K, A, B, ldb, nn, acc, chunk);
    stream_block<Avx512, E>(M, K, A, B, ldb, trans, nn, acc);
  });
}

}  // namespace ftx::cpu::avx512
#endif
