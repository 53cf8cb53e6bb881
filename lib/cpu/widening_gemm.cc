#include "lib/cpu/widening_gemm.h"

#include <cblas.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/half_rounding.h"
#include "formats/fp8_e4m3.h"

namespace ftx::cpu {

namespace {

constexpr int64_t kPanelCols = kWideningPanelCols;  // column chunk: accumulators or widened panel

// How each narrow type widens to fp32: one element (portable code), sixteen (AVX-512).
template <NarrowType>
struct Narrow;

template <>
struct Narrow<NarrowType::kInt8> {
  using T = int8_t;
  static float one(const T* p) { return static_cast<float>(*p); }
#if defined(__x86_64__)
  __attribute__((target("avx512f"), always_inline)) static inline __m512 sixteen(const T* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
#endif
};

template <>
struct Narrow<NarrowType::kFp32> {
  using T = float;
  static float one(const T* p) { return *p; }
#if defined(__x86_64__)
  __attribute__((target("avx512f"), always_inline)) static inline __m512 sixteen(const T* p) {
    return _mm512_loadu_ps(p);
  }
#endif
};

template <>
struct Narrow<NarrowType::kFp16> {
  using T = uint16_t;
  static float one(const T* p) { return half_to_float(*p); }
#if defined(__x86_64__)
  // vcvtph2ps: exact, every fp16 value is an fp32 value.
  __attribute__((target("avx512f"), always_inline)) static inline __m512 sixteen(const T* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
#endif
};

template <>
struct Narrow<NarrowType::kBf16> {
  using T = uint16_t;
  static float one(const T* p) { return bf16_to_float(*p); }
#if defined(__x86_64__)
  // bf16 is the top half of an fp32: zero-extend to 32 bits and shift into place.
  __attribute__((target("avx512f"), always_inline)) static inline __m512 sixteen(const T* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
#endif
};

template <>
struct Narrow<NarrowType::kFp8E4M3> {
  using T = uint8_t;
  static float one(const T* p) { return quant::e4m3_to_float(*p); }
#if defined(__x86_64__)
  // E4M3 to fp16 bits is a shift: sign to bit 15, exponent and mantissa to bits 7..13, which reads
  // every finite E4M3 value (subnormals too) as 2^-8 times itself (vcvtph2ps: exact); the loader
  // refuses NaN codes, the one thing this does not carry over.
  __attribute__((target("avx512f"), always_inline)) static inline __m512 sixteen(const T* p) {
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7f)), 7),
                                      _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
  }
#endif
};

// Calls f(Narrow<type>{}): where a NarrowType becomes its widening rule for the AVX-512 kernels
// and the element size (the portable target_clones switches below name each type too, so that
// their inlined loops are compiled for each clone's target).
template <class F>
decltype(auto) with_narrow(NarrowType type, F&& f) {
  switch (type) {
    case NarrowType::kInt8: return f(Narrow<NarrowType::kInt8>{});
    case NarrowType::kFp16: return f(Narrow<NarrowType::kFp16>{});
    case NarrowType::kBf16: return f(Narrow<NarrowType::kBf16>{});
    case NarrowType::kFp8E4M3: return f(Narrow<NarrowType::kFp8E4M3>{});
    case NarrowType::kFp32: break;
  }
  return f(Narrow<NarrowType::kFp32>{});
}

// acc[m][j] += A[m][k] · B[k][j] (or B[j][k] with trans) over k, for m < M and j < nn: the portable
// path, vectorised by the compiler for whichever target clone runs it.
template <class E>
__attribute__((always_inline)) inline void stream_rows_portable_t(int64_t M, int64_t K, const float* A,
                                                                  const void* Bv, int64_t ldb, bool trans,
                                                                  int64_t nn, float* acc) {
  const auto* B = static_cast<const typename E::T*>(Bv);
  if (trans) {
    for (int64_t j = 0; j < nn; ++j)
      for (int64_t m = 0; m < M; ++m) {
        float t = 0.0f;
        for (int64_t k = 0; k < K; ++k) t += A[m * K + k] * E::one(B + j * ldb + k);
        acc[m * nn + j] += t;
      }
    return;
  }
  for (int64_t k = 0; k < K; ++k) {
    const typename E::T* row = B + k * ldb;
    for (int64_t m = 0; m < M; ++m) {
      const float a = A[m * K + k];
      float* out = acc + m * nn;
      for (int64_t j = 0; j < nn; ++j) out[j] += a * E::one(row + j);
    }
  }
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void stream_rows_portable(NarrowType type, int64_t M, int64_t K, const float* A, const void* B, int64_t ldb,
                          bool trans, int64_t nn, float* acc) {
  switch (type) {
    case NarrowType::kInt8: stream_rows_portable_t<Narrow<NarrowType::kInt8>>(M, K, A, B, ldb, trans, nn, acc); break;
    case NarrowType::kFp16: stream_rows_portable_t<Narrow<NarrowType::kFp16>>(M, K, A, B, ldb, trans, nn, acc); break;
    case NarrowType::kBf16: stream_rows_portable_t<Narrow<NarrowType::kBf16>>(M, K, A, B, ldb, trans, nn, acc); break;
    case NarrowType::kFp32: stream_rows_portable_t<Narrow<NarrowType::kFp32>>(M, K, A, B, ldb, trans, nn, acc); break;
    case NarrowType::kFp8E4M3:
      stream_rows_portable_t<Narrow<NarrowType::kFp8E4M3>>(M, K, A, B, ldb, trans, nn, acc);
      break;
  }
}

#if defined(__x86_64__)
// The same products with AVX-512 by hand: the compiler's version keeps acc in memory, so every k
// loads and stores the accumulators and the kernel ends up bound by L1 traffic, not by the weights
// it streams. Here each block of 16·C columns keeps R rows x C zmm sums in registers for the whole
// K loop (R·C <= 16); a k reads one contiguous 16·C-element segment of a weight row (widened to
// fp32) and does C·R FMAs. Wide blocks (C = 16 at one row) mean few passes over the rows of B and
// long contiguous reads, which the hardware prefetcher follows. The sums continue from acc (zero
// at the start of a GEMM), so a caller may run K in blocks and every sum is still one FMA chain
// over k in order. A: R rows with stride lda.
//
// Prefetch: while the first block of columns runs, each k also prefetches the first
// prefetch.bytes bytes of B row k + prefetch.rows_ahead, so that the blocks after it (which read
// the same rows further right) find them in cache, or so that the next piece of K is in cache
// when the next call starts. Read one narrow block at a time, the rows of B came from memory at
// about half the rate of one whole-row stream.
struct StreamPrefetch {
  int64_t bytes = 0;  // 0: none
  int64_t rows_ahead = 0;
};
template <class E, int R, int C>
__attribute__((target("avx512f"))) void stream_rows_avx512(int64_t K, const float* A, int64_t lda,
                                                           const typename E::T* B, int64_t ldb, int64_t nn,
                                                           float* acc, int64_t ldacc, StreamPrefetch pf = {}) {
  constexpr int64_t kWidth = 16 * C;
  const int64_t prefetch_bytes = pf.bytes, ahead = pf.rows_ahead;
  int64_t j = 0;
  for (; j + kWidth <= nn; j += kWidth) {
    __m512 s[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) s[r][c] = _mm512_loadu_ps(acc + r * ldacc + j + 16 * c);
    const bool prefetch = prefetch_bytes > 0 && j == 0;
    for (int64_t k = 0; k < K; ++k) {
      const typename E::T* row = B + k * ldb + j;
      if (prefetch) {
        const char* next = reinterpret_cast<const char*>(B + (k + ahead) * ldb);
        for (int64_t off = 0; off < prefetch_bytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
      }
      __m512 a[R];
      for (int r = 0; r < R; ++r) a[r] = _mm512_set1_ps(A[r * lda + k]);
      for (int c = 0; c < C; ++c) {
        const __m512 w = E::sixteen(row + 16 * c);
        for (int r = 0; r < R; ++r) s[r][c] = _mm512_fmadd_ps(a[r], w, s[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) _mm512_storeu_ps(acc + r * ldacc + j + 16 * c, s[r][c]);
  }
  if constexpr (C > 1) {  // what is left, in narrower blocks
    if (j < nn) stream_rows_avx512<E, R, C / 2>(K, A, lda, B + j, ldb, nn - j, acc + j, ldacc);
    return;
  }
  // The last < 16 columns. Written as fused multiply-adds, as the vector sums are: left to the
  // compiler, `t += a * b` was contracted for some R and not for others, and a row's last columns
  // then depended on how many rows shared the GEMM.
  for (; j < nn; ++j)
    for (int r = 0; r < R; ++r) {
      float t = acc[r * ldacc + j];
      for (int64_t k = 0; k < K; ++k) t = std::fma(A[r * lda + k], E::one(B + k * ldb + j), t);
      acc[r * ldacc + j] = t;
    }
}

// Transposed B ([N, K]: an embedding table as lm_head): output column j is the dot product of each
// A row with B row j. One B row at a time, so the whole table is read as one sequential stream
// (four rows side by side ran at half the rate: short interleaved streams the prefetcher follows
// badly); four accumulators per A row over consecutive 16-element steps hide the FMA latency.
template <class E, int R>
__attribute__((target("avx512f"))) void stream_rows_trans_avx512(int64_t K, const float* A, const typename E::T* B,
                                                                 int64_t ldb, int64_t nn, float* acc,
                                                                 int64_t ldacc) {
  const int64_t k64 = K / 64 * 64, k16 = K / 16 * 16;
  for (int64_t j = 0; j < nn; ++j) {
    const typename E::T* row = B + j * ldb;
    __m512 s[R][4];
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < 4; ++u) s[r][u] = _mm512_setzero_ps();
    for (int64_t k = 0; k < k64; k += 64)
      for (int u = 0; u < 4; ++u) {
        const __m512 w = E::sixteen(row + k + 16 * u);
        for (int r = 0; r < R; ++r) s[r][u] = _mm512_fmadd_ps(_mm512_loadu_ps(A + r * K + k + 16 * u), w, s[r][u]);
      }
    for (int64_t k = k64; k < k16; k += 16) {
      const __m512 w = E::sixteen(row + k);
      for (int r = 0; r < R; ++r) s[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(A + r * K + k), w, s[r][0]);
    }
    for (int r = 0; r < R; ++r) {
      float t = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[r][0], s[r][1]), _mm512_add_ps(s[r][2], s[r][3])));
      for (int64_t k = k16; k < K; ++k) t = std::fma(A[r * K + k], E::one(row + k), t);  // as stream_rows_avx512's tail
      acc[r * ldacc + j] = t;
    }
  }
}

// bf16 B transposed ([N, K]: an embedding table as lm_head, read row by row) on AVX512-BF16:
// vdpbf16ps multiplies 32 bf16 pairs of an A row and a B row per instruction and adds each
// adjacent pair of products into an fp32 lane (products exact, sums fp32), so a 64-byte line of
// B costs one instruction instead of two widenings and two FMAs. A16: the R rows of A in bf16.
template <int R>
__attribute__((target("avx512f,avx512bf16"))) void stream_rows_trans_dpbf16(int64_t K, const uint16_t* A16,
                                                                          const uint16_t* B, int64_t ldb,
                                                                          int64_t nn, float* acc, int64_t ldacc) {
  // One B row at a time (a single sequential stream, as stream_rows_trans_avx512), four
  // accumulators per A row over consecutive 32-element steps.
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

// Bytes of weights in one K piece of a streamed block: for one group of rows, and for several
// groups, which pass over each piece in turn (64 KB: the piece stays in L1/L2 between them).
// Measured with bench_decode_gemm on medium-sized layers, fp32: 2 rows took 0.94x of the time
// with 256 KB pieces as with 64 KB; 8 rows took 0.88x of the time with 64 KB as with 256 KB.
constexpr int64_t kStreamPieceBytes = 256 * 1024;
constexpr int64_t kStreamPieceBytesShared = 64 * 1024;

// Up to four rows of A at a time (16 accumulators in registers), each group over the whole block
// of at most kPanelCols columns, or over pieces of it along K. A transposed B (an embedding table
// as lm_head, 50k rows) is walked 16 rows at a time with every row group, so the table comes from
// memory once.
template <class E>
void stream_block_avx512(int64_t M, int64_t K, const float* A, const void* Bv, int64_t ldb, bool trans, int64_t nn,
                         float* acc) {
  const auto* B = static_cast<const typename E::T*>(Bv);
  if (trans) {
    constexpr int64_t kRowsOfB = 16;
    for (int64_t j = 0; j < nn; j += kRowsOfB) {
      const int64_t jn = std::min(kRowsOfB, nn - j);
      for (int64_t m0 = 0; m0 < M; m0 += 4) {
        const float* a = A + m0 * K;
        float* out = acc + m0 * nn + j;
        switch (std::min<int64_t>(4, M - m0)) {
          case 1: stream_rows_trans_avx512<E, 1>(K, a, B + j * ldb, ldb, jn, out, nn); break;
          case 2: stream_rows_trans_avx512<E, 2>(K, a, B + j * ldb, ldb, jn, out, nn); break;
          case 3: stream_rows_trans_avx512<E, 3>(K, a, B + j * ldb, ldb, jn, out, nn); break;
          default: stream_rows_trans_avx512<E, 4>(K, a, B + j * ldb, ldb, jn, out, nn); break;
        }
      }
    }
    return;
  }
  // Up to four rows at a time (16 accumulators in registers). More rows pass over the block in
  // turn, so the block is cut along K into pieces that stay in cache (a [K, 256] panel of fp32 is
  // 1 to 4 MB): the first group of rows reads a piece from memory, the others find it in cache.
  // Without the cut, 8 rows read a medium model's fp32 weights twice. One row is one whole-row
  // stream, which the hardware prefetcher follows alone (software prefetching made it slower).
  const int64_t row_bytes = nn * int64_t(sizeof(typename E::T));
  const int64_t ldb_bytes = ldb * int64_t(sizeof(typename E::T));
  const int64_t ahead = (4096 + ldb_bytes - 1) / ldb_bytes;  // rows: about 4 KB ahead
  const int64_t kb =
      M == 1 ? K : std::max<int64_t>(16, (M <= 4 ? kStreamPieceBytes : kStreamPieceBytesShared) / row_bytes);
  for (int64_t k0 = 0; k0 < K; k0 += kb) {
    const int64_t kn = std::min(kb, K - k0);
    const typename E::T* b = B + k0 * ldb;
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const float* a = A + m0 * K + k0;
      float* out = acc + m0 * nn;
      // One group of rows: it fetches its own rows a little ahead. Several: the first group of the
      // first piece does that; the last group of every piece, which reads from L2, fetches the
      // next piece meanwhile, so the first group of that piece finds it there.
      StreamPrefetch pf;
      if (M <= 4 || (m0 == 0 && k0 == 0)) pf = {row_bytes, ahead};
      else if (m0 + 4 >= M && k0 + kn < K) pf = {row_bytes, kn};
      switch (std::min<int64_t>(4, M - m0)) {
        case 1:  // one block over the whole panel, so that one row reads it as one sequential stream
          if (nn < 256 && nn >= 192)
            stream_rows_avx512<E, 1, 12>(kn, a, K, b, ldb, nn, out, nn, M == 1 ? StreamPrefetch{} : pf);
          else
            stream_rows_avx512<E, 1, 16>(kn, a, K, b, ldb, nn, out, nn, M == 1 ? StreamPrefetch{} : pf);
          break;
        case 2: stream_rows_avx512<E, 2, 8>(kn, a, K, b, ldb, nn, out, nn, pf); break;
        case 3: stream_rows_avx512<E, 3, 4>(kn, a, K, b, ldb, nn, out, nn, pf); break;
        default: stream_rows_avx512<E, 4, 4>(kn, a, K, b, ldb, nn, out, nn, pf); break;
      }
    }
  }
}
#endif

#if defined(__x86_64__)
// Many rows (prefill): register tiles of R rows x C zmm columns over widened strips of B. The
// weights are widened strip by strip inside the GEMM, never as a whole matrix: a strip is
// kStripCols columns of B for every k, widened to fp32 once into a buffer that stays in L2 while
// every R-row block of A passes over it, so each widened weight serves all M rows. Each sum is one
// FMA chain over k = 0..K-1 from zero, as in stream_rows_avx512: a row's results do not depend on
// how many rows share the GEMM, prefill or decode. The tile kernel is the same for every weight
// type (the strip is fp32); a new type needs only its Narrow<>::sixteen.
constexpr int64_t kStripCols = 64;  // 4 zmm
constexpr int kTileRows = 6;        // 6 x 4 accumulators + 4 weight registers of the 32

template <int R, int C>
__attribute__((target("avx512f"))) void tile_kernel(int64_t K, const float* A, int64_t lda, const float* strip,
                                                    float* acc, int64_t ldacc, __mmask16 last) {
  __m512 s[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) s[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 w[C];
    for (int c = 0; c < C; ++c) w[c] = _mm512_loadu_ps(strip + k * kStripCols + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + k]);
      for (int c = 0; c < C; ++c) s[r][c] = _mm512_fmadd_ps(a, w[c], s[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c + 1 < C; ++c) _mm512_storeu_ps(acc + r * ldacc + 16 * c, s[r][c]);
    _mm512_mask_storeu_ps(acc + r * ldacc + 16 * (C - 1), last, s[r][C - 1]);
  }
}

template <int R>
void tile_rows(int C, int64_t K, const float* A, int64_t lda, const float* strip, float* acc, int64_t ldacc,
               __mmask16 last) {
  switch (C) {
    case 1: return tile_kernel<R, 1>(K, A, lda, strip, acc, ldacc, last);
    case 2: return tile_kernel<R, 2>(K, A, lda, strip, acc, ldacc, last);
    case 3: return tile_kernel<R, 3>(K, A, lda, strip, acc, ldacc, last);
    default: return tile_kernel<R, 4>(K, A, lda, strip, acc, ldacc, last);
  }
}

// strip[k][j] = B(k, j) in fp32 for j < w (<= kStripCols), zero beyond: B row-major with stride ldb.
template <class E>
__attribute__((target("avx512f"))) void widen_strip(int64_t K, const typename E::T* B, int64_t ldb, int64_t w,
                                                    float* strip) {
  const int64_t w16 = w / 16 * 16;
  for (int64_t k = 0; k < K; ++k) {
    const typename E::T* row = B + k * ldb;
    float* out = strip + k * kStripCols;
    for (int64_t j = 0; j < w16; j += 16) _mm512_storeu_ps(out + j, E::sixteen(row + j));
    for (int64_t j = w16; j < w; ++j) out[j] = E::one(row + j);
    for (int64_t j = w; j < (w + 15) / 16 * 16; ++j) out[j] = 0.0f;
  }
}

// acc[m][j] = sum_k A[m][k] · B[k][j] for all M rows and nn columns (row stride of acc: nn).
template <class E>
void tile_block_avx512(int64_t M, int64_t K, const float* A, const void* Bv, int64_t ldb, int64_t nn, float* acc) {
  const auto* B = static_cast<const typename E::T*>(Bv);
  thread_local std::vector<float> strip;
  strip.resize(static_cast<size_t>(K * kStripCols));
  for (int64_t j = 0; j < nn; j += kStripCols) {
    const int64_t w = std::min(kStripCols, nn - j);
    widen_strip<E>(K, B + j, ldb, w, strip.data());
    const int C = static_cast<int>((w + 15) / 16);
    const __mmask16 last = static_cast<__mmask16>(w % 16 == 0 ? 0xFFFF : (1u << (w % 16)) - 1);
    for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
      const float* a = A + m0 * K;
      float* out = acc + m0 * nn + j;
      switch (std::min<int64_t>(kTileRows, M - m0)) {
        case 1: tile_rows<1>(C, K, a, K, strip.data(), out, nn, last); break;
        case 2: tile_rows<2>(C, K, a, K, strip.data(), out, nn, last); break;
        case 3: tile_rows<3>(C, K, a, K, strip.data(), out, nn, last); break;
        case 4: tile_rows<4>(C, K, a, K, strip.data(), out, nn, last); break;
        case 5: tile_rows<5>(C, K, a, K, strip.data(), out, nn, last); break;
        default: tile_rows<6>(C, K, a, K, strip.data(), out, nn, last); break;
      }
    }
  }
}

#endif

// acc[m][j] = sum_k A[m][k] · B(k, j) (acc zeroed by the caller), the fastest way the CPU allows.
// B points at column j = 0 of the block (row j = 0 with trans).
void stream_block(NarrowType type, int64_t M, int64_t K, const float* A, const void* B, int64_t ldb, bool trans,
                  int64_t nn, float* acc) {
#if defined(__x86_64__)
  if (type == NarrowType::kBf16 && trans && has_avx512_bf16()) return trans_bf16_dpbf16(M, K, A, B, ldb, nn, acc);
  if (has_avx512f()) {
    return with_narrow(type, [&](auto e) {
      using E = decltype(e);
      if (M > kWideningStreamRows && !trans) return tile_block_avx512<E>(M, K, A, B, ldb, nn, acc);
      stream_block_avx512<E>(M, K, A, B, ldb, trans, nn, acc);
    });
  }
#endif
  stream_rows_portable(type, M, K, A, B, ldb, trans, nn, acc);
}

// Whether stream_block takes any number of rows of a [K, N] B (AVX-512: the streaming kernel for
// few rows, the tile kernel for many); else, and for many rows of a transposed B (an embedding
// table as lm_head, which sgemm reads transposed well), many rows go through widened panels and sgemm.
bool stream_block_any_rows() {
#if defined(__x86_64__)
  return has_avx512f();
#else
  return false;
#endif
}

// panel = B's block widened to fp32 and times scale: [K, nn] (or [nn, K] with trans, no scale).
template <class E>
__attribute__((always_inline)) inline void widen_panel_t(int64_t K, const void* Bv, int64_t ldb, bool trans,
                                                         int64_t nn, const float* scale, float* panel) {
  const auto* B = static_cast<const typename E::T*>(Bv);
  if (trans) {
    for (int64_t j = 0; j < nn; ++j)
      for (int64_t k = 0; k < K; ++k) panel[j * K + k] = E::one(B + j * ldb + k);
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < nn; ++j)
      panel[k * nn + j] = E::one(B + k * ldb + j) * (scale ? scale[j] : 1.0f);
}

#if defined(__x86_64__)
// widen_panel_t with sixteen elements at a time along the contiguous direction.
template <class E>
__attribute__((target("avx512f"))) void widen_panel_avx512(int64_t K, const void* Bv, int64_t ldb, bool trans,
                                                           int64_t nn, const float* scale, float* panel) {
  const auto* B = static_cast<const typename E::T*>(Bv);
  const int64_t len = trans ? K : nn, lines = trans ? nn : K, len16 = len / 16 * 16;
  for (int64_t i = 0; i < lines; ++i) {
    const typename E::T* src = B + i * ldb;
    float* dst = panel + i * len;
    int64_t j = 0;
    for (; j < len16; j += 16) {
      __m512 x = E::sixteen(src + j);
      if (scale && !trans) x = _mm512_mul_ps(x, _mm512_loadu_ps(scale + j));
      _mm512_storeu_ps(dst + j, x);
    }
    for (; j < len; ++j) dst[j] = E::one(src + j) * (scale && !trans ? scale[j] : 1.0f);
  }
}
#endif

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void widen_panel_portable(NarrowType type, int64_t K, const void* B, int64_t ldb, bool trans, int64_t nn, const float* scale,
                 float* panel) {
  switch (type) {
    case NarrowType::kInt8: widen_panel_t<Narrow<NarrowType::kInt8>>(K, B, ldb, trans, nn, scale, panel); break;
    case NarrowType::kFp16: widen_panel_t<Narrow<NarrowType::kFp16>>(K, B, ldb, trans, nn, scale, panel); break;
    case NarrowType::kBf16: widen_panel_t<Narrow<NarrowType::kBf16>>(K, B, ldb, trans, nn, scale, panel); break;
    case NarrowType::kFp32: widen_panel_t<Narrow<NarrowType::kFp32>>(K, B, ldb, trans, nn, scale, panel); break;
    case NarrowType::kFp8E4M3: widen_panel_t<Narrow<NarrowType::kFp8E4M3>>(K, B, ldb, trans, nn, scale, panel); break;
  }
}

// panel = B's block widened to fp32 and times scale: [K, nn] (or [nn, K] with trans, no scale).
void widen_panel(NarrowType type, int64_t K, const void* B, int64_t ldb, bool trans, int64_t nn, const float* scale,
                 float* panel) {
#if defined(__x86_64__)
  if (has_avx512f())
    return with_narrow(type, [&](auto e) { widen_panel_avx512<decltype(e)>(K, B, ldb, trans, nn, scale, panel); });
#endif
  widen_panel_portable(type, K, B, ldb, trans, nn, scale, panel);
}

size_t element_size(NarrowType type) {
  return with_narrow(type, [](auto e) { return sizeof(typename decltype(e)::T); });
}

}  // namespace

ColumnSegment column_segment(const void* B, size_t elem_size, int64_t K, int64_t N, int64_t panel_cols, int64_t col) {
  const auto* bytes = static_cast<const uint8_t*>(B);
  if (panel_cols <= 0) return {bytes + static_cast<size_t>(col) * elem_size, N, N - col};
  const int64_t first = col / panel_cols * panel_cols;
  const int64_t width = std::min(panel_cols, N - first);
  return {bytes + static_cast<size_t>(first * K + (col - first)) * elem_size, width, first + width - col};
}

int64_t balanced_panel_cols(int64_t N, int threads) {
  for (const int64_t w : {int64_t(256), int64_t(192), int64_t(128), int64_t(64)}) {
    const int64_t panels = (N + w - 1) / w;
    if (panels % std::max(threads, 1) == 0 && (w == kWideningPanelCols || N % w == 0)) return w;
  }
  return kWideningPanelCols;
}

void pack_column_panels(void* data, size_t elem_size, int64_t K, int64_t N, int64_t panel_cols) {
  if (panel_cols <= 0 || panel_cols > kWideningPanelCols)
    throw Error("pack_column_panels: panel width " + std::to_string(panel_cols) + " is not in 1.." +
                std::to_string(kWideningPanelCols));
  if (N <= panel_cols) return;  // one panel: the row-major layout already
  auto* d = static_cast<uint8_t*>(data);
  const std::vector<uint8_t> plain(d, d + static_cast<size_t>(K * N) * elem_size);
  for (int64_t first = 0; first < N; first += panel_cols) {
    const int64_t width = std::min(panel_cols, N - first);
    for (int64_t k = 0; k < K; ++k)
      std::memcpy(d + static_cast<size_t>(first * K + k * width) * elem_size,
                  plain.data() + static_cast<size_t>(k * N + first) * elem_size, static_cast<size_t>(width) * elem_size);
  }
}

void widening_gemm_block(NarrowType type, int64_t M, int64_t N, int64_t K, const float* A, const void* B,
                         bool trans_b, int64_t panel_cols, const float* scale, float* C, float beta, int64_t n0,
                         int64_t nn) {
  const auto* bytes = static_cast<const uint8_t*>(B);
  const size_t el = element_size(type);
  // Chunks of at most kPanelCols columns that never straddle a panel of a packed B: each is a
  // [K, cn] block with row stride ldb (rows of [N, K] with trans_b).
  auto chunk = [&](int64_t col, int64_t end) -> ColumnSegment {
    if (trans_b) return {bytes + static_cast<size_t>(col * K) * el, K, std::min(kPanelCols, end - col)};
    ColumnSegment seg = column_segment(B, el, K, N, panel_cols, col);
    seg.width = std::min({seg.width, kPanelCols, end - col});
    return seg;
  };
  const int64_t end = n0 + nn;
  if (M <= kWideningStreamRows || (!trans_b && stream_block_any_rows())) {
    // Column chunks keep the M accumulator rows in L1 while the weights stream through.
    thread_local std::vector<float> acc;
    for (int64_t col = n0; col < end;) {
      const ColumnSegment seg = chunk(col, end);
      const int64_t cn = seg.width;
      acc.assign(static_cast<size_t>(M * cn), 0.0f);
      stream_block(type, M, K, A, seg.start, seg.ld, trans_b, cn, acc.data());
      for (int64_t m = 0; m < M; ++m) {
        float* c = C + m * N + col;
        const float* a = acc.data() + m * cn;
        for (int64_t j = 0; j < cn; ++j)
          c[j] = a[j] * (scale ? scale[col + j] : 1.0f) + (beta != 0.0f ? beta * c[j] : 0.0f);
      }
      col += cn;
    }
    return;
  }
  thread_local std::vector<float> panel;
  for (int64_t col = n0; col < end;) {
    const ColumnSegment seg = chunk(col, end);
    const int64_t cn = seg.width;
    if (type == NarrowType::kFp32 && !scale) {  // already fp32: sgemm reads the block where it is
      cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, cn, K, 1.0f, A, K,
                  static_cast<const float*>(seg.start), seg.ld, beta, C + col, N);
      col += cn;
      continue;
    }
    panel.resize(static_cast<size_t>(K * cn));
    widen_panel(type, K, seg.start, seg.ld, trans_b, cn, scale ? scale + col : nullptr, panel.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, cn, K, 1.0f, A, K, panel.data(),
                trans_b ? K : cn, beta, C + col, N);
    col += cn;
  }
}

}  // namespace ftx::cpu
