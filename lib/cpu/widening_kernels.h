// The widening GEMM kernels (widening_gemm.h), written once over a vector level V (simd_vec.h) and
// a weight type E (narrow_type.h). Included only by the files that compile them for a level
// (widening_avx512.cc, widening_avx2.cc), inside that level's `#pragma GCC target` region and a
// namespace of its own, after every standard header: so each level's instantiations are its own
// functions, and no inline function of a standard header is compiled for a level the CPU may lack.
//
// The arithmetic contract, the same at every level: each output is one FMA chain over k = 0..K-1
// in order, starting from zero (the streaming kernel continues the chain across K pieces through
// acc), so a row's sums do not depend on how many rows share the GEMM, nor on the level (AVX2 and
// AVX-512 give the same bits for a [K, N] B), nor on the panel width. A transposed B (an embedding
// table as lm_head) is a dot product per output, summed in lanes and reduced: the same for any
// number of rows, but its bits depend on the level's lane count.
#ifndef FTX_WIDENING_KERNELS_LEVEL
#error "widening_kernels.h is included by the per-level kernel files only"
#endif

// The register shapes that fit each level's register file: sums of R rows x C vectors stay in
// registers for a whole K loop, with C weight vectors and R broadcasts beside them.
template <class V>
struct Shapes;
template <>
struct Shapes<simd::Avx512> {
  static constexpr int kOneRow = 16, kOneRowNarrow = 12;  // 256 columns; 192 for panels of 192..255
  static constexpr int kTwoRows = 8, kThreeRows = 4, kFourRows = 4;
  // A rows per pass over a transposed B (4 sums each), for any number of rows at this level: the
  // transposed tile kernel (trans_tile_block) is not measured here, no AVX-512 machine since.
  static constexpr int kTransRows = 4;
  static constexpr int kStripVecs = 4;   // tile kernel: 64-column strips, 6 rows: 24 sums + 4 weights
  static constexpr int64_t kChunkRows = 1024;  // tile kernel: K rows widened at a time (a strip: 256 KB, L2)
  static constexpr int64_t kMaxStreamRows = 16;  // more rows take the tile kernel
};
template <>
struct Shapes<simd::Avx2> {
  static constexpr int kOneRow = 12, kOneRowNarrow = 12;  // 96 columns: 12 sums + weight + broadcast
  static constexpr int kTwoRows = 6, kThreeRows = 4, kFourRows = 3;
  static constexpr int kTransRows = 3;
  // From 16 rows a transposed B takes the transposed tile kernel: 2 rows x 6 table rows, 12 sums + 2
  // rows + a weight. On the Llama-1B-sized table it took 0.64-0.79x of the streaming kernel's time at
  // 32 rows (fp32; bf16 0.83-0.93x), about the same at 16, 1.0-1.5x at 4 to 12
  // (bench/results/decode-gemm-2026-11-29-trans-tile.txt).
  static constexpr int kTransTileRows = 2, kTransTileCols = 6;
  static constexpr int64_t kTransTileMinRows = 16;
  static constexpr int kStripVecs = 2;   // 16-column strips, 6 rows: 12 sums + 2 weights + broadcast
  static constexpr int64_t kChunkRows = 256;   // a strip: 16 KB, in L1
  // 9 to 16 rows: the streaming kernel widens each weight once per group of 4 rows, the tile kernel
  // once for all rows. On Llama-1B-sized layers the tile kernel took 0.70-0.87x of the streaming
  // kernel's time at 16 rows and 0.89-1.26x at 8 (fp32 slowest, int8 level); the threshold
  // experiment is in bench/results/decode-gemm-2026-11-29-spread.txt.
  static constexpr int64_t kMaxStreamRows = 8;
};
constexpr int kTileRows = 6;

template <class V, class E>
__attribute__((always_inline)) inline typename V::F wide(const typename E::T* p) {
  if constexpr (std::is_same_v<E, Narrow<NarrowType::kInt8>>) return V::widen_int8(p);
  else if constexpr (std::is_same_v<E, Narrow<NarrowType::kFp16>>) return V::widen_fp16(p);
  else if constexpr (std::is_same_v<E, Narrow<NarrowType::kBf16>>) return V::widen_bf16(p);
  else if constexpr (std::is_same_v<E, Narrow<NarrowType::kFp8E4M3>>) return V::widen_fp8(p);
  else return V::load(p);
}

// While the first block of columns runs, each k also prefetches (row_prefetch.h) the first `bytes`
// bytes of B row k + ahead, so that the blocks after it (which read the same rows further right)
// find them in cache, or so that the next piece of K is in cache when the next call starts. Read one
// narrow block at a time, the rows of B came from memory at about half the rate of one whole-row
// stream.

// acc[r][j] += Σ_k A[r][k] · B[k][j] for R rows (stride lda) and nn columns. Each block of
// lanes·C columns keeps R x C sums in registers for the whole K loop; a k reads one contiguous
// segment of a weight row (widened to fp32) and does R·C FMAs. Wide blocks mean few passes over
// the rows of B and long contiguous reads, which the hardware prefetcher follows.
template <class V, class E, int R, int C>
void stream_rows(int64_t K, const float* A, int64_t lda, const typename E::T* B, int64_t ldb, int64_t nn, float* acc,
                 int64_t ldacc, RowPrefetch pf = {}, SpreadPrefetch* next = nullptr) {
  using F = typename V::F;
  constexpr int64_t kWidth = int64_t{V::kLanes} * C;
  int64_t j = 0;
  for (; j + kWidth <= nn; j += kWidth) {
    F s[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) s[r][c] = V::load(acc + r * ldacc + j + V::kLanes * c);
    const bool prefetch = pf.bytes > 0 && j == 0;
    for (int64_t k = 0; k < K; ++k) {
      const typename E::T* row = B + k * ldb + j;
      if (prefetch) prefetch_bytes(B + (k + pf.ahead) * ldb, pf.bytes);
      if (next) next->step();
      F a[R];
      for (int r = 0; r < R; ++r) a[r] = V::set1(A[r * lda + k]);
      for (int c = 0; c < C; ++c) {
        const F w = wide<V, E>(row + V::kLanes * c);
        for (int r = 0; r < R; ++r) s[r][c] = V::fmadd(a[r], w, s[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) V::store(acc + r * ldacc + j + V::kLanes * c, s[r][c]);
  }
  if constexpr (C > 1) {  // what is left, in narrower blocks
    if (j < nn) stream_rows<V, E, R, (C == 3 ? 2 : C / 2)>(K, A, lda, B + j, ldb, nn - j, acc + j, ldacc, {}, next);
    return;
  }
  // The last < lanes columns. Written as fused multiply-adds, as the vector sums are: left to the
  // compiler, `t += a * b` was contracted for some R and not for others, and a row's last columns
  // then depended on how many rows shared the GEMM.
  for (; j < nn; ++j)
    for (int r = 0; r < R; ++r) {
      float t = acc[r * ldacc + j];
      for (int64_t k = 0; k < K; ++k) t = std::fma(A[r * lda + k], E::one(B + k * ldb + j), t);
      acc[r * ldacc + j] = t;
    }
}

// One row (batch-1 decode) of fp32 weights over a block wider than the level's registers hold sums
// for (AVX2: 96 columns of a 256-column panel): the sums live in acc (L1) instead, and four rows of
// B are read per pass over the block, each one contiguous stretch, so a packed panel is one
// sequential stream. Each output is still one FMA chain over k in order from acc's zero, so the
// bits are stream_rows'.
// (In 96-column register blocks, three passes over a panel read a third of each row each time, and
// the prefetcher follows that at a fraction of the memory's rate.)
template <class V, class E>
void stream_one_row_wide(int64_t K, const float* A, const typename E::T* B, int64_t ldb, int64_t nn, float* acc) {
  using F = typename V::F;
  constexpr int64_t L = V::kLanes;
  const int64_t nl = nn / L * L;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const F a0 = V::set1(A[k]), a1 = V::set1(A[k + 1]), a2 = V::set1(A[k + 2]), a3 = V::set1(A[k + 3]);
    const typename E::T* b0 = B + k * ldb;
    const typename E::T *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
    for (int64_t j = 0; j < nl; j += L) {
      F s = V::load(acc + j);
      s = V::fmadd(a0, wide<V, E>(b0 + j), s);
      s = V::fmadd(a1, wide<V, E>(b1 + j), s);
      s = V::fmadd(a2, wide<V, E>(b2 + j), s);
      s = V::fmadd(a3, wide<V, E>(b3 + j), s);
      V::store(acc + j, s);
    }
  }
  for (; k < K; ++k) {
    const F a = V::set1(A[k]);
    const typename E::T* b = B + k * ldb;
    for (int64_t j = 0; j < nl; j += L) V::store(acc + j, V::fmadd(a, wide<V, E>(b + j), V::load(acc + j)));
  }
  for (int64_t j = nl; j < nn; ++j) {  // the last < lanes columns, as stream_rows does them
    float t = acc[j];
    for (int64_t kk = 0; kk < K; ++kk) t = std::fma(A[kk], E::one(B + kk * ldb + j), t);
    acc[j] = t;
  }
}

// Transposed B ([N, K]: an embedding table as lm_head): output column j is the dot product of each
// A row with B row j. One B row at a time, so the whole table is read as one sequential stream
// (four rows side by side ran at half the rate: short interleaved streams the prefetcher follows
// badly); four accumulators per A row over consecutive steps hide the FMA latency.
template <class V, class E, int R>
void stream_rows_trans(int64_t K, const float* A, const typename E::T* B, int64_t ldb, int64_t nn, float* acc,
                       int64_t ldacc) {
  using F = typename V::F;
  constexpr int64_t L = V::kLanes;
  const int64_t k4 = K / (4 * L) * (4 * L), k1 = K / L * L;
  // One-byte weights (an --int8-lm-head table, FP8) also fetch the row about 4 KB ahead: one core
  // streams int8 it widens at 7.2 GB/s on its own, 10.4 GB/s with that prefetch
  // (bench_widen_stream_rate); the 124M int8 lm_head step took 0.84x of the time with it at the AVX2
  // cap (7.0-7.5 against 8.4-8.9 ms). Two-byte tables ran slower with it (bf16: 12.5-13.2 against
  // 11.8-12.3 ms), fp32 as fast: the hardware prefetcher keeps up with them alone.
  const int64_t row_bytes = K * int64_t(sizeof(typename E::T));
  const int64_t ahead = sizeof(typename E::T) == 1 ? rows_in_4kb(row_bytes) : 0;
  for (int64_t j = 0; j < nn; ++j) {
    const typename E::T* row = B + j * ldb;
    if (ahead > 0 && j + ahead < nn) prefetch_bytes(B + (j + ahead) * ldb, row_bytes);
    F s[R][4];
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < 4; ++u) s[r][u] = V::zero();
    for (int64_t k = 0; k < k4; k += 4 * L)
      for (int u = 0; u < 4; ++u) {
        const F w = wide<V, E>(row + k + L * u);
        for (int r = 0; r < R; ++r) s[r][u] = V::fmadd(V::load(A + r * K + k + L * u), w, s[r][u]);
      }
    for (int64_t k = k4; k < k1; k += L) {
      const F w = wide<V, E>(row + k);
      for (int r = 0; r < R; ++r) s[r][0] = V::fmadd(V::load(A + r * K + k), w, s[r][0]);
    }
    for (int r = 0; r < R; ++r) {
      float t = V::reduce_add(V::add(V::add(s[r][0], s[r][1]), V::add(s[r][2], s[r][3])));
      for (int64_t k = k1; k < K; ++k) t = std::fma(A[r * K + k], E::one(row + k), t);
      acc[r * ldacc + j] = t;
    }
  }
}

// Many rows against a transposed B (the tied lm_head of a batched decode step, from
// Shapes<V>::kTransTileMinRows rows):
// stream_rows_trans serves at most kTransRows rows per weight vector and keeps four sums per
// output, so at 32 rows it waits on loads (3 rows x 4 sums: 16 loads per 12 FMAs). Here a register
// tile holds one sum for each of R rows x J table rows: a weight vector serves R rows and an A
// vector J outputs (AVX2: 8 loads per 12 FMAs). The tile's table rows are widened K chunk by K
// chunk into a buffer in the order the tile reads them, once for all rows: read in place, rows of
// a power-of-two length (2048 floats) fall on the same few L1 sets and evict each other.
//
// The bits are stream_rows_trans's. Its four sums of an output are four separate FMA chains, chain u
// over the vectors at k = u·L, u·L + 4L, ...; chain 0 goes on over the vectors past the last whole
// 4L step; then ((s0 + s1) + (s2 + s3)) is reduced across lanes and the last < L products are added
// one by one. Here the chains run one after another, each continued from K chunk to K chunk through
// `part`, and end in the same reduction.

// Table rows b[0..J) widened: out[c][i][j] (vectors) = b[j] at k = k0 + c·L + i·stride, for
// `chains` chains of `steps` steps. Each row is read in order.
template <class V, class E, int J>
void trans_pack(const typename E::T* const (&b)[J], int64_t k0, int chains, int64_t steps, int64_t stride,
                float* out) {
  constexpr int64_t L = V::kLanes;
  for (int j = 0; j < J; ++j)
    for (int64_t i = 0; i < steps; ++i)
      for (int c = 0; c < chains; ++c)
        V::store(out + ((c * steps + i) * J + j) * L, wide<V, E>(b[j] + k0 + c * L + i * stride));
}

// One chain of an R x J tile over `steps` packed steps (w: that chain's [steps][J] vectors), A read
// at k, k + stride, ...; from zero or from `part` ([R][J] vectors), left in `part`.
template <class V, int R, int J>
void trans_tile_pass(const float* const (&a)[R], const float* w, int64_t k, int64_t steps, int64_t stride,
                     bool from_zero, float* part) {
  using F = typename V::F;
  constexpr int64_t L = V::kLanes;
  F s[R][J];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) s[r][j] = from_zero ? V::zero() : V::load(part + (r * J + j) * L);
  for (int64_t i = 0; i < steps; ++i, k += stride, w += J * L) {
    F x[R];
    for (int r = 0; r < R; ++r) x[r] = V::load(a[r] + k);
    for (int j = 0; j < J; ++j) {
      F wj = V::load(w + j * L);
      // One load per weight vector: left to itself, GCC folds the load into each of the R FMAs.
      __asm__("" : "+x"(wj));
      for (int r = 0; r < R; ++r) s[r][j] = V::fmadd(x[r], wj, s[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) V::store(part + (r * J + j) * L, s[r][j]);
}

// K per chunk of the packed table rows: J x 512 widened floats (12 KB at AVX2) stay in L1
// while every group of rows passes over them. A multiple of 4L at both levels.
constexpr int64_t kTransChunk = 512;

// The scratch trans_tile_block needs for M rows, in floats: the four chains of each group's tile,
// and the packed chunk.
template <class V>
constexpr int64_t trans_scratch_floats(int64_t M) {
  constexpr int R = Shapes<V>::kTransTileRows, J = Shapes<V>::kTransTileCols;
  return (M + R - 1) / R * 4 * R * J * V::kLanes + J * kTransChunk;
}

// acc[m][j] = A row m · B row j for M rows and nn table rows (row stride ldb), the sums of
// stream_rows_trans. A group of fewer than R rows, or a tile of fewer than J table rows, repeats
// its last row and drops what it computed for it. scratch: trans_scratch_floats(M) floats.
template <class V, class E>
void trans_tile_block(int64_t M, int64_t K, const float* A, const void* Bv, int64_t ldb, int64_t nn, float* acc,
                      float* scratch) {
  using F = typename V::F;
  using T = typename E::T;
  constexpr int R = Shapes<V>::kTransTileRows, J = Shapes<V>::kTransTileCols;
  constexpr int64_t L = V::kLanes, kStep = 4 * L;
  constexpr int64_t kGroupFloats = 4 * R * J * L, kChainFloats = R * J * L;
  static_assert(kTransChunk % kStep == 0, "a chunk holds whole steps of the four chains");
  const auto* B = static_cast<const T*>(Bv);
  const int64_t k4 = K / kStep * kStep, k1 = K / L * L;
  const int64_t groups = (M + R - 1) / R;
  float* part = scratch;
  float* packed = scratch + groups * kGroupFloats;
  auto rows_of = [&](int64_t g, const float* (&a)[R]) {
    for (int r = 0; r < R; ++r) a[r] = A + std::min(g * R + r, M - 1) * K;
  };
  for (int64_t j0 = 0; j0 < nn; j0 += J) {
    const T* b[J];
    for (int j = 0; j < J; ++j) b[j] = B + std::min(j0 + j, nn - 1) * ldb;
    if (k4 == 0)  // no whole step: the chains start at zero (a loop, not std::fill: see the file's head)
      for (int64_t i = 0; i < groups * kGroupFloats; ++i) part[i] = 0.0f;
    for (int64_t k0 = 0; k0 < k4; k0 += kTransChunk) {
      const int64_t steps = (std::min(k4, k0 + kTransChunk) - k0) / kStep;
      trans_pack<V, E, J>(b, k0, 4, steps, kStep, packed);
      // The table rows the next pack reads (this tile's next chunk, or the next tile's first) come
      // toward L2 a share per group of rows, so that the pack does not wait on memory.
      SpreadPrefetch next;
      if (k0 + kTransChunk < K) {
        next = SpreadPrefetch(b[0] + k0 + kTransChunk, J, std::min(kTransChunk, K - k0 - kTransChunk) * int64_t(sizeof(T)),
                              ldb * int64_t(sizeof(T)), 1);
      } else if (j0 + J < nn) {
        next = SpreadPrefetch(B + (j0 + J) * ldb, std::min<int64_t>(J, nn - j0 - J),
                              std::min(kTransChunk, K) * int64_t(sizeof(T)), ldb * int64_t(sizeof(T)), 1);
      }
      const int per_group =
          lines_per_step(J * std::min(kTransChunk, K) * int64_t(sizeof(T)), groups);
      for (int64_t g = 0; g < groups; ++g) {
        const float* a[R];
        rows_of(g, a);
        for (int u = 0; u < 4; ++u)
          trans_tile_pass<V, R, J>(a, packed + u * steps * J * L, k0 + u * L, steps, kStep, k0 == 0,
                                   part + g * kGroupFloats + u * kChainFloats);
        for (int i = 0; i < per_group; ++i) next.step();
      }
    }
    if (k1 > k4) trans_pack<V, E, J>(b, k4, 1, (k1 - k4) / L, L, packed);
    for (int64_t g = 0; g < groups; ++g) {
      const float* a[R];
      rows_of(g, a);
      if (k1 > k4) trans_tile_pass<V, R, J>(a, packed, k4, (k1 - k4) / L, L, false, part + g * kGroupFloats);
      for (int r = 0; r < R && g * R + r < M; ++r)
        for (int j = 0; j < J && j0 + j < nn; ++j) {
          const float* p = part + g * kGroupFloats + (r * J + j) * L;
          const F s0 = V::load(p), s1 = V::load(p + kChainFloats), s2 = V::load(p + 2 * kChainFloats),
                  s3 = V::load(p + 3 * kChainFloats);
          float t = V::reduce_add(V::add(V::add(s0, s1), V::add(s2, s3)));
          for (int64_t k = k1; k < K; ++k) t = std::fma(a[r][k], E::one(b[j] + k), t);
          acc[(g * R + r) * nn + j0 + j] = t;
        }
    }
  }
}

// Bytes of weights in one K piece of a streamed block: for one group of rows, and for several
// groups, which pass over each piece in turn (64 KB: the piece stays in L1/L2 between them).
// Measured with bench_decode_gemm on medium-sized layers, fp32, AVX-512: 2 rows took 0.94x of the
// time with 256 KB pieces as with 64 KB; 8 rows took 0.88x of the time with 64 KB as with 256 KB.
constexpr int64_t kStreamPieceBytes = 256 * 1024;
constexpr int64_t kStreamPieceBytesShared = 64 * 1024;

// R rows of one group (R <= 4) over one piece: the widest block that keeps the sums in registers.
template <class V>
constexpr int group_vecs(int R, int64_t nn) {
  using S = Shapes<V>;
  switch (R) {
    case 1: return nn < 256 && nn >= V::kLanes * S::kOneRowNarrow ? S::kOneRowNarrow : S::kOneRow;
    case 2: return S::kTwoRows;
    case 3: return S::kThreeRows;
    default: return S::kFourRows;
  }
}

template <class V, class E>
void stream_group(int R, int64_t K, const float* A, int64_t lda, const typename E::T* B, int64_t ldb, int64_t nn,
                  float* acc, RowPrefetch pf, SpreadPrefetch* next) {
  using S = Shapes<V>;
  switch (R) {
    case 1:
      if (group_vecs<V>(1, nn) == S::kOneRowNarrow)
        return stream_rows<V, E, 1, S::kOneRowNarrow>(K, A, lda, B, ldb, nn, acc, nn, pf, next);
      return stream_rows<V, E, 1, S::kOneRow>(K, A, lda, B, ldb, nn, acc, nn, pf, next);
    case 2: return stream_rows<V, E, 2, S::kTwoRows>(K, A, lda, B, ldb, nn, acc, nn, pf, next);
    case 3: return stream_rows<V, E, 3, S::kThreeRows>(K, A, lda, B, ldb, nn, acc, nn, pf, next);
    default: return stream_rows<V, E, 4, S::kFourRows>(K, A, lda, B, ldb, nn, acc, nn, pf, next);
  }
}

template <class V, class E, int R>
void trans_group(int64_t K, const float* A, const typename E::T* B, int64_t ldb, int64_t jn, float* acc,
                 int64_t ldacc, int rows) {
  if constexpr (R > 1) {
    if (rows < R) return trans_group<V, E, R - 1>(K, A, B, ldb, jn, acc, ldacc, rows);
  }
  stream_rows_trans<V, E, R>(K, A, B, ldb, jn, acc, ldacc);
}

// Any number of rows, few (decode) or many: up to four rows at a time (sums in registers). More
// rows pass over the block in turn, so the block is cut along K into pieces that stay in cache (a
// [K, 256] panel of fp32 is 1 to 4 MB): the first group of rows reads a piece from memory, the
// others find it in cache. Without the cut, 8 rows read a medium model's fp32 weights twice. One
// row whose block covers the panel is one whole-row stream, which the hardware prefetcher follows
// alone (software prefetching made it slower). A transposed B is walked 16 rows at a time with
// every row group, so the table comes from memory once.
template <class V, class E>
void stream_block(int64_t M, int64_t K, const float* A, const void* Bv, int64_t ldb, bool trans, int64_t nn,
                  float* acc) {
  const auto* B = static_cast<const typename E::T*>(Bv);
  if (trans) {
    constexpr int R = Shapes<V>::kTransRows;
    const int64_t block = M <= R ? nn : 16;
    for (int64_t j = 0; j < nn; j += block) {
      const int64_t jn = std::min(block, nn - j);
      for (int64_t m0 = 0; m0 < M; m0 += R)
        trans_group<V, E, R>(K, A + m0 * K, B + j * ldb, ldb, jn, acc + m0 * nn + j, nn,
                             static_cast<int>(std::min<int64_t>(R, M - m0)));
    }
    return;
  }
  const int64_t row_bytes = nn * int64_t(sizeof(typename E::T));
  const int64_t ldb_bytes = ldb * int64_t(sizeof(typename E::T));
  const int64_t ahead = rows_in_4kb(ldb_bytes);
  // fp32 only: for narrow weights the widening, not the reads, bounds AVX2 on one row (2 uops on the
  // FMA ports per vector), and the extra acc load and store per four rows cost more than the passes
  // (bench_decode_gemm at the AVX2 cap over 12 GPT-2 layers, bench/results/decode-gemm-2026-11-28-avx2.txt:
  // fp32 15.9 -> 13.5 ms, bf16 11.6 -> 13.5 ms).
  if (std::is_same_v<typename E::T, float> && M == 1 && nn > int64_t{V::kLanes} * Shapes<V>::kOneRow)
    return stream_one_row_wide<V, E>(K, A, B, ldb, nn, acc);
  const bool one_stream = M == 1 && nn <= int64_t{V::kLanes} * Shapes<V>::kOneRow;
  const int64_t kb =
      one_stream ? K : std::max<int64_t>(16, (M <= 4 ? kStreamPieceBytes : kStreamPieceBytesShared) / row_bytes);
  for (int64_t k0 = 0; k0 < K; k0 += kb) {
    const int64_t kn = std::min(kb, K - k0);
    const typename E::T* b = B + k0 * ldb;
    // Two rows and more: the next piece comes from memory while every group and block works on
    // this one, spread over all their k steps, so that the reads never wait for the arithmetic and
    // the arithmetic waits for the reads only on the first piece. (bench_decode_gemm, Llama-1B-sized
    // layers at the AVX2 level, bench/results/decode-gemm-2026-11-29-spread.txt.) One row keeps its
    // own rows' prefetch a few KB ahead: its arithmetic is too little to hide anything behind.
    const int64_t next_rows = M == 1 ? 0 : std::min(kb, K - k0 - kn);
    SpreadPrefetch next;
    if (next_rows > 0) {
      int64_t steps = 0;
      for (int64_t m0 = 0; m0 < M; m0 += 4) {
        const int64_t width = int64_t{V::kLanes} * group_vecs<V>(static_cast<int>(std::min<int64_t>(4, M - m0)), nn);
        steps += (nn + width - 1) / width * kn;
      }
      next = SpreadPrefetch(b + kn * ldb, next_rows, row_bytes, ldb_bytes, lines_per_step(next_rows * row_bytes, steps));
    }
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      // The first group of the first piece (and a lone row on every piece) fetches its own rows a
      // little ahead; the pieces after it were fetched while the one before them was worked on.
      RowPrefetch pf;
      if (!one_stream && ((k0 == 0 && m0 == 0) || M == 1)) pf = {row_bytes, ahead};
      stream_group<V, E>(static_cast<int>(std::min<int64_t>(4, M - m0)), kn, A + m0 * K + k0, K, b, ldb, nn,
                         acc + m0 * nn, pf, next_rows > 0 ? &next : nullptr);
    }
  }
}

// Many rows (prefill, and decode of more than Shapes<V>::kMaxStreamRows rows): register tiles of up to
// kTileRows rows x kStripVecs vectors over widened weights. The block's weights are widened K chunk
// by K chunk: kChunkRows rows of all its columns, read as one sequential stream (a packed panel's
// rows follow one another) into a buffer that stays in L2 while every tile of every strip (a few
// vectors' width of its columns) passes over it, so each widened weight serves all M rows. The tiles'
// sums continue in acc from one chunk to the next: each is one FMA chain over k from acc's zero, as
// in stream_rows. (Widening one 16-column strip over all of K instead read the panel in 64-byte
// pieces a row stride apart, which the hardware prefetcher does not follow: at 32 to 64 rows the
// GEMMs waited on memory. bench_prefill_gemm, one GPT layer of hidden 2048, 64 rows, against that:
// 0.76x of the time in fp32 at the AVX2 cap, 0.92x at AVX-512; 512 rows within 7% either way:
// bench/results/prefill-gemm-2026-11-28-tile-chunks.txt. The chunk's rows: AVX2's best of 256 and
// 1024, AVX-512's, both measured there.)

template <class V, int R, int C>
void tile_kernel(int64_t K, const float* A, int64_t lda, const float* strip, int64_t strip_cols, float* acc,
                 int64_t ldacc, int last) {
  using F = typename V::F;
  F s[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c + 1 < C; ++c) s[r][c] = V::load(acc + r * ldacc + V::kLanes * c);
    s[r][C - 1] = last == V::kLanes ? V::load(acc + r * ldacc + V::kLanes * (C - 1))
                                    : V::load_first(acc + r * ldacc + V::kLanes * (C - 1), last);
  }
  for (int64_t k = 0; k < K; ++k) {
    F w[C];
    for (int c = 0; c < C; ++c) w[c] = V::load(strip + k * strip_cols + V::kLanes * c);
    for (int r = 0; r < R; ++r) {
      const F a = V::set1(A[r * lda + k]);
      for (int c = 0; c < C; ++c) s[r][c] = V::fmadd(a, w[c], s[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c + 1 < C; ++c) V::store(acc + r * ldacc + V::kLanes * c, s[r][c]);
    if (last == V::kLanes)
      V::store(acc + r * ldacc + V::kLanes * (C - 1), s[r][C - 1]);
    else
      V::store_first(acc + r * ldacc + V::kLanes * (C - 1), s[r][C - 1], last);
  }
}

template <class V, int R>
void tile_rows(int C, int64_t K, const float* A, int64_t lda, const float* strip, int64_t strip_cols, float* acc,
               int64_t ldacc, int last) {
  constexpr int kMaxC = Shapes<V>::kStripVecs;
  switch (C) {
    case 1: return tile_kernel<V, R, 1>(K, A, lda, strip, strip_cols, acc, ldacc, last);
    case 2: return tile_kernel<V, R, (kMaxC >= 2 ? 2 : 1)>(K, A, lda, strip, strip_cols, acc, ldacc, last);
    case 3: return tile_kernel<V, R, (kMaxC >= 3 ? 3 : 1)>(K, A, lda, strip, strip_cols, acc, ldacc, last);
    default: return tile_kernel<V, R, kMaxC>(K, A, lda, strip, strip_cols, acc, ldacc, last);
  }
}

// The floats between one widened strip and the next: K rows of S, and one row more, so that the
// strips do not start at addresses a power of two apart (widen_strips writes to all of them for each
// k: on the same few cache sets they would evict each other).
constexpr int64_t strip_pitch(int64_t K, int64_t S) { return (K + 1) * S; }

// B's [K, w] block widened to fp32 strip by strip: strip t (columns [t·S, t·S + S) of the block, S =
// kStripCols) is a row-major [K, S] array at out + t·strip_pitch(K, S), zero past w up to a whole
// vector. Each strip is contiguous, so one strip's K rows stay in L1 while every tile passes over
// it (rows a block's width apart would share a few cache sets and evict each other). B row-major,
// stride ldb.
template <class V, class E, int64_t S>
void widen_strips(int64_t K, const typename E::T* B, int64_t ldb, int64_t w, float* out) {
  const int64_t wl = w / V::kLanes * V::kLanes;
  const int64_t padded = (w + V::kLanes - 1) / V::kLanes * V::kLanes;
  const int64_t pitch = strip_pitch(K, S);
  for (int64_t k = 0; k < K; ++k) {
    const typename E::T* row = B + k * ldb;
    auto at = [&](int64_t j) { return out + (j / S) * pitch + k * S + j % S; };
    for (int64_t j = 0; j < wl; j += V::kLanes) V::store(at(j), wide<V, E>(row + j));
    for (int64_t j = wl; j < w; ++j) *at(j) = E::one(row + j);
    for (int64_t j = w; j < padded; ++j) *at(j) = 0.0f;
  }
}

// acc[m][j] += Σ_k A[m][k] · B[k][j] for all M rows and nn (<= kWideningPanelCols) columns (row
// stride of acc: nn; the caller zeroes it). chunk: the caller's scratch of tile_chunk_floats(K).
template <class V, class E>
void tile_block(int64_t M, int64_t K, const float* A, const void* Bv, int64_t ldb, int64_t nn, float* acc,
                float* chunk) {
  constexpr int64_t kStripCols = int64_t{V::kLanes} * Shapes<V>::kStripVecs;
  const auto* B = static_cast<const typename E::T*>(Bv);
  for (int64_t k0 = 0; k0 < K; k0 += Shapes<V>::kChunkRows) {
    const int64_t kc = std::min(Shapes<V>::kChunkRows, K - k0);
    widen_strips<V, E, kStripCols>(kc, B + k0 * ldb, ldb, nn, chunk);
    for (int64_t j = 0; j < nn; j += kStripCols) {
      const int64_t w = std::min(kStripCols, nn - j);
      const int C = static_cast<int>((w + V::kLanes - 1) / V::kLanes);
      const int last = static_cast<int>(w - int64_t{V::kLanes} * (C - 1));
      const float* strip = chunk + (j / kStripCols) * strip_pitch(kc, kStripCols);
      for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
        const float* a = A + m0 * K + k0;
        float* out = acc + m0 * nn + j;
        switch (std::min<int64_t>(kTileRows, M - m0)) {
          case 1: tile_rows<V, 1>(C, kc, a, K, strip, kStripCols, out, nn, last); break;
          case 2: tile_rows<V, 2>(C, kc, a, K, strip, kStripCols, out, nn, last); break;
          case 3: tile_rows<V, 3>(C, kc, a, K, strip, kStripCols, out, nn, last); break;
          case 4: tile_rows<V, 4>(C, kc, a, K, strip, kStripCols, out, nn, last); break;
          case 5: tile_rows<V, 5>(C, kc, a, K, strip, kStripCols, out, nn, last); break;
          default: tile_rows<V, 6>(C, kc, a, K, strip, kStripCols, out, nn, last); break;
        }
      }
    }
  }
}

// The chunk scratch tile_block needs, in floats: the strips of a panel's widest block.
template <class V>
constexpr int64_t tile_chunk_floats(int64_t K) {
  constexpr int64_t S = int64_t{V::kLanes} * Shapes<V>::kStripVecs;
  return kWideningPanelCols / S * strip_pitch(std::min(K, Shapes<V>::kChunkRows), S);
}
