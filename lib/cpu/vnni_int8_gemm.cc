#include "lib/cpu/vnni_int8_gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "lib/cpu/cpu_features.h"
#include "lib/cpu/vnni_int8_levels.h"
#include "lib/cpu/widening_gemm.h"

namespace ftx::cpu {

namespace {

constexpr int64_t kPanel = kWideningPanelCols;

// Where panel p starts and how wide it is.
struct Panel {
  const uint8_t* data;
  int64_t first, width;
};

Panel panel_of(const uint8_t* packed, int64_t K4, int64_t N, int64_t col) {
  const int64_t first = col / kPanel * kPanel;
  return {packed + static_cast<size_t>(first) * static_cast<size_t>(K4), first, std::min(kPanel, N - first)};
}

// Columns [j0, j0 + cols) of one panel (ldw = 4·width bytes per group of 4 rows), rows [0, R) of
// a: the portable path, also the reference the vectorised one is tested against.
void panel_product_portable(const VnniActivations& a, int64_t m0, int64_t rows, const uint8_t* w, int64_t ldw,
                            int64_t j0, int64_t cols, int32_t* acc, int64_t ldacc) {
  const int64_t K4 = vnni_padded_k(a.K);
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* q = a.q + (m0 + r) * K4;
    for (int64_t j = 0; j < cols; ++j) {
      int32_t s = 0;
      for (int64_t g = 0; g < K4 / 4; ++g)
        for (int t = 0; t < 4; ++t) s += int32_t{w[g * ldw + (j0 + j) * 4 + t]} * int32_t{q[4 * g + t]};
      acc[r * ldacc + j] = s - 128 * a.row_sum[m0 + r];
    }
  }
}

#if defined(__x86_64__)
// R rows × C blocks of 16 columns, all R·C sums in registers for the whole K loop; a group of 4
// rows of the weights is C contiguous 64-byte loads, R broadcasts and R·C vpdpbusd. `mask` selects
// the columns of a last, narrower block (C = 1 only). Written as flat, fully unrolled arrays:
// GCC 12 kept a two-dimensional s[R][C] in one scratch register and copied every sum in and out of
// it around each vpdpbusd (three instructions per product), which ran the prefill GEMM at 40% of
// the cores' VNNI rate.
template <int R, int C>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void vnni_block(const int8_t* q, int64_t K4, const int32_t* row_sum,
                                                                      const uint8_t* w, int64_t ldw, __mmask16 mask,
                                                                      int32_t* acc, int64_t ldacc) {
  static_assert(R * C + C <= 32, "sums and weights must fit the 32 vector registers");
  __m512i s[R * C];
#pragma GCC unroll 32
  for (int i = 0; i < R * C; ++i) s[i] = _mm512_setzero_si512();
  const int64_t groups = K4 / 4;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* row = w + g * ldw;
    __m512i wv[C];
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) wv[c] = _mm512_maskz_loadu_epi32(mask, row + 64 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, q + r * K4 + 4 * g, sizeof four);
      const __m512i b = _mm512_set1_epi32(four);
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) s[r * C + c] = _mm512_dpbusd_epi32(s[r * C + c], wv[c], b);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512i offset = _mm512_set1_epi32(128 * row_sum[r]);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c)
      _mm512_mask_storeu_epi32(acc + r * ldacc + 16 * c, mask, _mm512_sub_epi32(s[r * C + c], offset));
  }
}

// Columns [0, cols) from w (a panel's column 0 moved to the block's first), R rows: wide blocks
// first, then narrower ones, then one masked block for the last < 16 columns.
template <int R, int C>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void vnni_columns(const int8_t* q, int64_t K4, const int32_t* row_sum,
                                                                        const uint8_t* w, int64_t ldw, int64_t cols,
                                                                        int32_t* acc, int64_t ldacc) {
  int64_t j = 0;
  for (; j + 16 * C <= cols; j += 16 * C)
    vnni_block<R, C>(q, K4, row_sum, w + 4 * j, ldw, 0xFFFF, acc + j, ldacc);
  if (j == cols) return;
  if constexpr (C > 1) {
    vnni_columns<R, C / 2>(q, K4, row_sum, w + 4 * j, ldw, cols - j, acc + j, ldacc);
  } else {
    const auto mask = static_cast<__mmask16>((1u << (cols - j)) - 1u);
    vnni_block<R, 1>(q, K4, row_sum, w + 4 * j, ldw, mask, acc + j, ldacc);
  }
}

// All rows of a over columns [j0, j0 + cols) of one panel: four rows at a time (16 sums in
// registers), each 64-column slab of the panel read once per row group and kept in L2 for the
// next (prefill); one row reads the whole chunk in 256-column blocks (decode).
void panel_product_vnni(const VnniActivations& a, const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols,
                        int32_t* acc, int64_t ldacc) {
  note_kernel_level(CpuIsa::kAvx512);
  const int64_t K4 = vnni_padded_k(a.K);
  const uint8_t* wj = w + 4 * j0;
  if (a.M <= 4) {
    switch (a.M) {
      case 1: vnni_columns<1, 16>(a.q, K4, a.row_sum, wj, ldw, cols, acc, ldacc); break;
      case 2: vnni_columns<2, 8>(a.q, K4, a.row_sum, wj, ldw, cols, acc, ldacc); break;
      case 3: vnni_columns<3, 4>(a.q, K4, a.row_sum, wj, ldw, cols, acc, ldacc); break;
      default: vnni_columns<4, 4>(a.q, K4, a.row_sum, wj, ldw, cols, acc, ldacc); break;
    }
    return;
  }
  constexpr int64_t kSlab = 64;
  for (int64_t j = 0; j < cols; j += kSlab) {
    const int64_t width = std::min(kSlab, cols - j);
    for (int64_t m0 = 0; m0 < a.M; m0 += 4) {
      const int8_t* q = a.q + m0 * K4;
      const int32_t* sums = a.row_sum + m0;
      int32_t* out = acc + m0 * ldacc + j;
      switch (std::min<int64_t>(4, a.M - m0)) {
        case 1: vnni_columns<1, 4>(q, K4, sums, wj + 4 * j, ldw, width, out, ldacc); break;
        case 2: vnni_columns<2, 4>(q, K4, sums, wj + 4 * j, ldw, width, out, ldacc); break;
        case 3: vnni_columns<3, 4>(q, K4, sums, wj + 4 * j, ldw, width, out, ldacc); break;
        default: vnni_columns<4, 4>(q, K4, sums, wj + 4 * j, ldw, width, out, ldacc); break;
      }
    }
  }
}
#endif

}  // namespace

void pack_int8_vnni(const int8_t* q, int64_t K, int64_t N, uint8_t* out) {
  const int64_t K4 = vnni_padded_k(K);
  for (int64_t first = 0; first < N; first += kPanel) {
    const int64_t width = std::min(kPanel, N - first);
    uint8_t* panel = out + static_cast<size_t>(first) * static_cast<size_t>(K4);
    for (int64_t k = 0; k < K4; ++k)
      for (int64_t j = 0; j < width; ++j) {
        const int8_t v = k < K ? q[k * N + first + j] : int8_t{0};
        panel[(k / 4) * (4 * width) + 4 * j + k % 4] = static_cast<uint8_t>(static_cast<int32_t>(v) + 128);
      }
  }
}

namespace {

// Columns [n0, n0 + nn), a panel at a time, each by `panel_product`(panel, ldw, j0, cols, out).
template <class PanelProduct>
void for_panels(const VnniActivations& a, const uint8_t* packed, int64_t N, int64_t n0, int64_t nn, int32_t* acc,
                const PanelProduct& panel_product) {
  const int64_t K4 = vnni_padded_k(a.K);
  for (int64_t col = n0; col < n0 + nn;) {
    const Panel p = panel_of(packed, K4, N, col);
    const int64_t j0 = col - p.first, cols = std::min(p.first + p.width, n0 + nn) - col;
    panel_product(p.data, 4 * p.width, j0, cols, acc + (col - n0));
    col += cols;
  }
}

}  // namespace

void vnni_int8_product_portable(const VnniActivations& a, const uint8_t* packed, int64_t N, int64_t n0, int64_t nn,
                                int32_t* acc) {
  note_kernel_level(CpuIsa::kBaseline);
  for_panels(a, packed, N, n0, nn, acc, [&](const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols, int32_t* out) {
    panel_product_portable(a, 0, a.M, w, ldw, j0, cols, out, nn);
  });
}

Int8ProductKernel int8_product_kernel(const KernelFeatures& f) {
#if defined(__x86_64__)
  if (f.avx512_vnni) return Int8ProductKernel::kAvx512Vnni;
  if (f.isa >= CpuIsa::kAvx2) return f.avx_vnni ? Int8ProductKernel::kAvxVnni : Int8ProductKernel::kAvx2Emulated;
#endif
  (void)f;
  return Int8ProductKernel::kPortable;
}

void vnni_int8_product(const VnniActivations& a, const uint8_t* packed, int64_t N, int64_t n0, int64_t nn,
                       int32_t* acc) {
  static const Int8ProductKernel kernel = int8_product_kernel(kernel_features());
#if defined(__x86_64__)
  if (kernel == Int8ProductKernel::kAvx512Vnni) {
    for_panels(a, packed, N, n0, nn, acc, [&](const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols, int32_t* out) {
      panel_product_vnni(a, w, ldw, j0, cols, out, nn);
    });
    return;
  }
  if (kernel != Int8ProductKernel::kPortable) {
    // AVX-VNNI's 256-bit vpdpbusd, or its emulation; the last < 8 columns of a panel in portable code.
    const auto level_product =
        kernel == Int8ProductKernel::kAvxVnni ? avx_vnni::int8_panel_product : avx2::int8_panel_product;
    for_panels(a, packed, N, n0, nn, acc, [&](const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols, int32_t* out) {
      const int64_t done = level_product(a, w, ldw, j0, cols, out, nn);
      if (done < cols) panel_product_portable(a, 0, a.M, w, ldw, j0 + done, cols - done, out + done, nn);
    });
    return;
  }
#endif
  vnni_int8_product_portable(a, packed, N, n0, nn, acc);
}

}  // namespace ftx::cpu
