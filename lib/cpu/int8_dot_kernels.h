// The W8A8 int8 product (vnni_int8_gemm.h) at the AVX2 level, written once over a dot-product
// policy D: AVX-VNNI's vpdpbusd where the CPU has it, else an exact emulation with vpmaddwd.
// Included only by vnni_int8_avx2.cc, inside a `#pragma GCC target` region and a
// namespace of its own per policy, after every standard header (as widening_kernels.h).
//
// A 32-byte load of a packed panel is 8 columns x 4 rows of K (the layout of vnni_int8_gemm.h, in
// halves of the AVX-512 load). Sums are exact in int32, so every level gives the same bits.
#ifndef FTX_INT8_DOT_KERNELS_LEVEL
#error "int8_dot_kernels.h is included by vnni_int8_avx2.cc only"
#endif

// A block reads 32·C bytes of each group's ldw (1 KB in a 256-column panel), the blocks after it the
// same groups further right (one row at the AVX2 level without VNNI: blocks of 32 columns, where the
// AVX-512 kernel's one block covers the panel). So the first block of a panel also fetches its whole
// groups about 4 KB ahead (row_prefetch.h), and the blocks after it find the panel in L2.
inline RowPrefetch whole_rows_ahead(int64_t ldw, int64_t cols) { return {4 * cols, rows_in_4kb(ldw)}; }

// R rows x C blocks of 8 columns, all sums in registers for the whole K loop: one group of 4 rows
// of the weights is C 32-byte loads, R broadcasts of four activation bytes (in the policy's form,
// D::A), R·C dot products.
template <class D, int R, int C>
void dot_block(const int8_t* q, int64_t K4, const int32_t* row_sum, const uint8_t* w, int64_t ldw, int32_t* acc,
               int64_t ldacc, RowPrefetch pf = {}) {
  __m256i s[R * C];
  for (int i = 0; i < R * C; ++i) s[i] = _mm256_setzero_si256();
  const int64_t groups = K4 / 4;
  for (int64_t g = 0; g < groups; ++g) {
    if (pf.bytes > 0) prefetch_bytes(w + (g + pf.ahead) * ldw, pf.bytes);
    typename D::W wv[C];
    for (int c = 0; c < C; ++c)
      wv[c] = D::prepare(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * ldw + 32 * c)));
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, q + r * K4 + 4 * g, sizeof four);
      const typename D::A b = D::broadcast(four);
      for (int c = 0; c < C; ++c) s[r * C + c] = D::dot(s[r * C + c], wv[c], b);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m256i offset = _mm256_set1_epi32(128 * row_sum[r]);
    for (int c = 0; c < C; ++c)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + r * ldacc + 8 * c), _mm256_sub_epi32(s[r * C + c], offset));
  }
}

// Columns [0, cols) from w (the block's first column), R rows, in blocks of 8·C columns, then
// narrower; returns the columns done (a multiple of 8: the caller finishes the rest).
// pf: for the first block only (it fetches for the others).
template <class D, int R, int C>
int64_t dot_columns(const int8_t* q, int64_t K4, const int32_t* row_sum, const uint8_t* w, int64_t ldw, int64_t cols,
                    int32_t* acc, int64_t ldacc, RowPrefetch pf = {}) {
  int64_t j = 0;
  for (; j + 8 * C <= cols; j += 8 * C)
    dot_block<D, R, C>(q, K4, row_sum, w + 4 * j, ldw, acc + j, ldacc, j == 0 ? pf : RowPrefetch{});
  if constexpr (C > 1)
    j += dot_columns<D, R, C / 2>(q, K4, row_sum, w + 4 * j, ldw, cols - j, acc + j, ldacc, j == 0 ? pf : RowPrefetch{});
  return j;
}

template <class D, int C>
int64_t dot_group(int rows, const int8_t* q, int64_t K4, const int32_t* row_sum, const uint8_t* w, int64_t ldw,
                  int64_t cols, int32_t* acc, int64_t ldacc, RowPrefetch pf = {}) {
  switch (rows) {
    case 1: return dot_columns<D, 1, 2 * C>(q, K4, row_sum, w, ldw, cols, acc, ldacc, pf);
    case 2: return dot_columns<D, 2, C>(q, K4, row_sum, w, ldw, cols, acc, ldacc, pf);
    case 3: return dot_columns<D, 3, C>(q, K4, row_sum, w, ldw, cols, acc, ldacc, pf);
    default: return dot_columns<D, 4, C>(q, K4, row_sum, w, ldw, cols, acc, ldacc, pf);
  }
}

// All rows of a over columns [j0, j0 + cols) of one panel: four rows at a time; more rows take the
// panel in 32-column slabs that stay in L1 while every group of rows passes over them. Returns the
// columns done (the same for every row).
template <class D>
int64_t panel_product(const VnniActivations& a, const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols,
                      int32_t* acc, int64_t ldacc) {
  const int64_t K4 = vnni_padded_k(a.K);
  const uint8_t* wj = w + 4 * j0;
  if (a.M <= 4)
    return dot_group<D, D::kWide>(static_cast<int>(a.M), a.q, K4, a.row_sum, wj, ldw, cols, acc, ldacc,
                                  whole_rows_ahead(ldw, cols));
  constexpr int64_t kSlab = 32;
  const int64_t whole = cols / 8 * 8;
  for (int64_t j = 0; j < whole; j += kSlab) {
    const int64_t width = std::min(kSlab, whole - j);
    for (int64_t m0 = 0; m0 < a.M; m0 += 4)
      dot_group<D, 2>(static_cast<int>(std::min<int64_t>(4, a.M - m0)), a.q + m0 * K4, K4, a.row_sum + m0,
                      wj + 4 * j, ldw, width, acc + m0 * ldacc + j, ldacc,
                      j == 0 && m0 == 0 ? whole_rows_ahead(ldw, cols) : RowPrefetch{});
  }
  return whole;
}
