#include "lib/util/transpose.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "formats/error.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace ftx {

namespace {

// Tiles of 64 x 64 elements (8 KiB of halves: source and destination tile stay in L1), and while
// one tile is transposed the next one's source lines are prefetched. The source is a checkpoint's
// page cache read down a column of rows a row stride apart (2-16 KiB), which the hardware
// prefetchers do not follow across pages: without the software prefetch each line was a demand
// miss, and 256 x 64 tiles ran at 3.1 GB/s on the 2-vCPU Xeon guest of bench/convert; these run
// at 4.2 GB/s (a micro-benchmark over the 345M checkpoint's mapping, 2026-11-28; 64 x 256, 128 x 128
// and 32 x 64 with the prefetch were within 3% of it, every shape without it at 2.0-3.1 GB/s).
constexpr int64_t kTile = 64;

#ifdef __SSE2__
inline __m128i load(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void store(uint8_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

// 8 x 8 block of 2-byte elements; ss/ds are row strides in bytes.
inline void block8x2(const uint8_t* s, int64_t ss, uint8_t* d, int64_t ds) {
  __m128i a[8], b[8], c[8];
  for (int i = 0; i < 8; ++i) a[i] = load(s + i * ss);
  for (int i = 0; i < 4; ++i) {
    b[2 * i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // pairs (b0,b2) (b1,b3) and (b4,b6) (b5,b7)
    c[4 * i + 0] = _mm_unpacklo_epi32(b[4 * i + 0], b[4 * i + 2]);
    c[4 * i + 1] = _mm_unpackhi_epi32(b[4 * i + 0], b[4 * i + 2]);
    c[4 * i + 2] = _mm_unpacklo_epi32(b[4 * i + 1], b[4 * i + 3]);
    c[4 * i + 3] = _mm_unpackhi_epi32(b[4 * i + 1], b[4 * i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    store(d + (2 * i) * ds, _mm_unpacklo_epi64(c[i], c[i + 4]));
    store(d + (2 * i + 1) * ds, _mm_unpackhi_epi64(c[i], c[i + 4]));
  }
}

// 4 x 4 block of 4-byte elements.
inline void block4x4(const uint8_t* s, int64_t ss, uint8_t* d, int64_t ds) {
  __m128i a0 = load(s), a1 = load(s + ss), a2 = load(s + 2 * ss), a3 = load(s + 3 * ss);
  __m128i b0 = _mm_unpacklo_epi32(a0, a1), b1 = _mm_unpackhi_epi32(a0, a1);
  __m128i b2 = _mm_unpacklo_epi32(a2, a3), b3 = _mm_unpackhi_epi32(a2, a3);
  store(d, _mm_unpacklo_epi64(b0, b2));
  store(d + ds, _mm_unpackhi_epi64(b0, b2));
  store(d + 2 * ds, _mm_unpacklo_epi64(b1, b3));
  store(d + 3 * ds, _mm_unpackhi_epi64(b1, b3));
}
#endif

// Source lines of rows [r0, r1), elements [c0, c1) into the cache ahead of their use.
inline void prefetch_tile(const uint8_t* src, int64_t ss, int64_t r0, int64_t r1, int64_t c0, int64_t c1, size_t es) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = src + r * ss;
    for (int64_t b = c0 * static_cast<int64_t>(es); b < c1 * static_cast<int64_t>(es); b += 64) __builtin_prefetch(row + b);
  }
}

// ss and ds are the row strides of src and dst in bytes.
template <size_t ES>
void transpose_tiled(const uint8_t* src, int64_t R, int64_t C, int64_t ss, uint8_t* dst, int64_t ds) {
  constexpr int64_t K = 16 / ES;  // register block side
  for (int64_t r0 = 0; r0 < R; r0 += kTile)
    for (int64_t c0 = 0; c0 < C; c0 += kTile) {
      const int64_t r1 = std::min(R, r0 + kTile), c1 = std::min(C, c0 + kTile);
      if (c1 < C) prefetch_tile(src, ss, r0, r1, c1, std::min(C, c1 + kTile), ES);
      else if (r1 < R) prefetch_tile(src, ss, r1, std::min(R, r1 + kTile), 0, std::min(C, kTile), ES);
      int64_t rb = r0, cb = c0;  // the blocked part is [r0, rb) x [c0, cb)
#ifdef __SSE2__
      rb = r0 + ((r1 - r0) / K) * K;
      cb = c0 + ((c1 - c0) / K) * K;
      for (int64_t c = c0; c < cb; c += K)
        for (int64_t r = r0; r < rb; r += K) {
          const uint8_t* s = src + r * ss + c * static_cast<int64_t>(ES);
          uint8_t* d = dst + c * ds + r * static_cast<int64_t>(ES);
          if (ES == 2) block8x2(s, ss, d, ds);
          else block4x4(s, ss, d, ds);
        }
#endif
      // Edges (and everything without SSE2): column by column, so the writes stay sequential.
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = (c < cb ? rb : r0); r < r1; ++r)
          std::memcpy(dst + c * ds + r * static_cast<int64_t>(ES), src + r * ss + c * static_cast<int64_t>(ES), ES);
    }
}

}  // namespace

void transpose_block(const uint8_t* src, int64_t R, int64_t C, int64_t src_stride, size_t elem_size, uint8_t* dst,
                     int64_t dst_stride) {
  const int64_t es = static_cast<int64_t>(elem_size);
  switch (elem_size) {
    case 2: return transpose_tiled<2>(src, R, C, src_stride * es, dst, dst_stride * es);
    case 4: return transpose_tiled<4>(src, R, C, src_stride * es, dst, dst_stride * es);
    default: throw Error("transpose of " + std::to_string(elem_size) + "-byte elements is not supported");
  }
}

void transpose_matrix(const uint8_t* src, int64_t R, int64_t C, size_t elem_size, uint8_t* dst) {
  transpose_block(src, R, C, C, elem_size, dst, R);
}

}  // namespace ftx
