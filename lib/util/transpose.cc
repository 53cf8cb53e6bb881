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

// Tiles of 256 source rows x 64 source columns keep the rows read and the rows written in L2 and
// their pages in the TLB (measured best of 16..1024 on 1.3B-model shapes, whose row strides are
// powers of two); inside a tile, K x K register blocks (8 x 8 halves, 4 x 4 words: one 16-byte
// vector per row).
constexpr int64_t kTileRows = 256, kTileCols = 64;

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

template <size_t ES>
void transpose_tiled(const uint8_t* src, int64_t R, int64_t C, uint8_t* dst) {
  constexpr int64_t K = 16 / ES;  // register block side
  for (int64_t r0 = 0; r0 < R; r0 += kTileRows)
    for (int64_t c0 = 0; c0 < C; c0 += kTileCols) {
      const int64_t r1 = std::min(R, r0 + kTileRows), c1 = std::min(C, c0 + kTileCols);
      int64_t rb = r0, cb = c0;  // the blocked part is [r0, rb) x [c0, cb)
#ifdef __SSE2__
      rb = r0 + ((r1 - r0) / K) * K;
      cb = c0 + ((c1 - c0) / K) * K;
      for (int64_t c = c0; c < cb; c += K)
        for (int64_t r = r0; r < rb; r += K) {
          const uint8_t* s = src + (r * C + c) * ES;
          uint8_t* d = dst + (c * R + r) * ES;
          if (ES == 2) block8x2(s, C * ES, d, R * ES);
          else block4x4(s, C * ES, d, R * ES);
        }
#endif
      // Edges (and everything without SSE2): column by column, so the writes stay sequential.
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = (c < cb ? rb : r0); r < r1; ++r)
          std::memcpy(dst + (c * R + r) * ES, src + (r * C + c) * ES, ES);
    }
}

}  // namespace

void transpose_matrix(const uint8_t* src, int64_t R, int64_t C, size_t elem_size, uint8_t* dst) {
  switch (elem_size) {
    case 2: return transpose_tiled<2>(src, R, C, dst);
    case 4: return transpose_tiled<4>(src, R, C, dst);
    default: throw Error("transpose of " + std::to_string(elem_size) + "-byte elements is not supported");
  }
}

}  // namespace ftx
