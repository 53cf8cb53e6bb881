// The INT4 GEMM kernels (int4_gemm.h), written once over a vector level V (simd_vec.h). Included only
// by the files that compile them for a level (int4_avx512.cc, int4_avx2.cc), inside that level's
// `#pragma GCC target` region and a namespace of its own, after every standard header (as
// widening_kernels.h is).
//
// The weights of a panel are read once per GEMM for all rows: up to four rows keep their sums in
// registers over one pass; more rows pass in groups of four over pieces of whole groups small enough
// to stay in L1 (the first group of rows reads a piece from memory, the others from cache). A word
// vector is unpacked (an and and a conversion per 8 rows' nibble) once per row group and serves all
// its rows. Each output's sums are int4_gemm.h's chains whatever R and C, so a row's bits do not
// depend on the rows beside it.
#ifndef FTX_INT4_KERNELS_LEVEL
#error "int4_kernels.h is included by the per-level kernel files only"
#endif

// Column vectors per row count: R x C sums in registers beside R broadcasts and the unpacked
// weights (AVX2: 16 registers, AVX-512: 32). One row covers a whole 64-column panel.
template <class V>
constexpr int int4_cols(int R) {
  if constexpr (V::kLanes == 16) return 4;
  else return R == 1 ? 8 : R == 2 ? 4 : 2;
}

// Pieces of whole groups of about this many bytes of a panel's words when more than one group of
// rows passes over them.
constexpr int64_t kInt4PieceBytes = 32 * 1024;

// Columns [j, width) of the panel that no whole vector covers: one at a time, the same chains.
template <int R>
void int4_tail(const Int4Panel& p, const Int4Activations& act, int64_t m0, int64_t g0, int64_t g1, int64_t j,
               float* acc) {
  const Int4Layout& w = *p.w;
  const int64_t lda = act.K, G = w.kernel_groups();
  for (; j < p.width; ++j)
    for (int r = 0; r < R; ++r) {
      const float* a = act.a.data() + (m0 + r) * lda;
      float out = acc[r * kInt4PanelCols + j];
      for (int64_t g = g0; g < g1; ++g) {
        float t = 0.0f;
        for (int64_t k = w.group_start[g]; k < w.group_start[g + 1]; k += 8) {
          const uint32_t word = p.words[(k / 8) * p.width + j];
          for (int tt = 0; tt < 7; ++tt)
            t = std::fma(a[k + tt], static_cast<float>(static_cast<int32_t>(word & (0xFu << (4 * tt)))), t);
          t = std::fma(a[k + 7], static_cast<float>(static_cast<int32_t>(word >> 28)), t);
        }
        const int64_t gid = w.group_id[g];
        const float z = w.zeros.empty() ? 8.0f : static_cast<float>(w.zeros[gid * w.N + p.col + j]);
        const float tz = std::fma(-act.group_sums[(m0 + r) * G + g], z, t);
        out = std::fma(tz, w.scales[gid * w.N + p.col + j], out);
      }
      acc[r * kInt4PanelCols + j] = out;
    }
}

// Rows [m0, m0 + R), groups [g0, g1), columns [j, width) of the panel: blocks of C vectors, then
// narrower blocks, then the tail.
template <class V, int R, int C>
void int4_rows(const Int4Panel& p, const Int4Activations& act, int64_t m0, int64_t g0, int64_t g1, int64_t j,
               float* acc) {
  using F = typename V::F;
  constexpr int64_t L = V::kLanes, kWidth = L * C;
  const Int4Layout& w = *p.w;
  const int64_t lda = act.K, G = w.kernel_groups(), pw = p.width;
  const float* a = act.a.data() + m0 * lda;
  const float* sums = act.group_sums.data() + m0 * G;
  for (; j + kWidth <= pw; j += kWidth)
    for (int64_t g = g0; g < g1; ++g) {
      F t[R][C];
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) t[r][c] = V::zero();
      for (int64_t k = w.group_start[g]; k < w.group_start[g + 1]; k += 8) {
        const uint32_t* row = p.words + (k / 8) * pw + j;
#pragma GCC unroll 8
        for (int tt = 0; tt < 8; ++tt) {
          F av[R];
          for (int r = 0; r < R; ++r) av[r] = V::set1(a[r * lda + k + tt]);
          for (int c = 0; c < C; ++c) {
            const F u = V::nibble(V::load_words(row + L * c), tt);
            for (int r = 0; r < R; ++r) t[r][c] = V::fmadd(av[r], u, t[r][c]);
          }
        }
      }
      const int64_t gid = w.group_id[g];
      const float* s = w.scales.data() + gid * w.N + p.col + j;
      const uint8_t* z = w.zeros.empty() ? nullptr : w.zeros.data() + gid * w.N + p.col + j;
      for (int c = 0; c < C; ++c) {
        const F zc = z ? V::widen_uint8(z + L * c) : V::set1(8.0f);
        const F sc = V::load(s + L * c);
        for (int r = 0; r < R; ++r) {
          const F tz = V::fmadd(V::set1(-sums[r * G + g]), zc, t[r][c]);
          float* o = acc + r * kInt4PanelCols + j + L * c;
          V::store(o, V::fmadd(tz, sc, V::load(o)));
        }
      }
    }
  if constexpr (C > 1) {
    if (j < pw) int4_rows<V, R, C / 2>(p, act, m0, g0, g1, j, acc);
  } else {
    int4_tail<R>(p, act, m0, g0, g1, j, acc);
  }
}

template <class V>
void int4_panel_t(const Int4Panel& p, const Int4Activations& act, float* acc) {
  const Int4Layout& w = *p.w;
  const int64_t M = act.M, G = w.kernel_groups();
  const int64_t bytes_per_row = p.width / 2;
  for (int64_t g0 = 0; g0 < G;) {
    int64_t g1 = G;
    if (M > 4) {
      g1 = g0 + 1;
      while (g1 < G && (w.group_start[g1 + 1] - w.group_start[g0]) * bytes_per_row <= kInt4PieceBytes) ++g1;
    }
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      float* out = acc + m0 * kInt4PanelCols;
      switch (std::min<int64_t>(4, M - m0)) {
        case 1: int4_rows<V, 1, int4_cols<V>(1)>(p, act, m0, g0, g1, 0, out); break;
        case 2: int4_rows<V, 2, int4_cols<V>(2)>(p, act, m0, g0, g1, 0, out); break;
        case 3: int4_rows<V, 3, int4_cols<V>(3)>(p, act, m0, g0, g1, 0, out); break;
        default: int4_rows<V, 4, int4_cols<V>(4)>(p, act, m0, g0, g1, 0, out); break;
      }
    }
    g0 = g1;
  }
}
