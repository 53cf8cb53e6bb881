#include "lib/cpu/widening_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/narrow_type.h"
#include "lib/cpu/widening_levels.h"

namespace ftx::cpu {

namespace {

constexpr int64_t kPanelCols = kWideningPanelCols;  // column chunk of the accumulators

// The baseline level's kernel (any x86-64, and other CPUs): portable loops the compiler
// vectorises for SSE2. acc[m][j] += A[m][k] · B[k][j] over k in order for each output (no FMA at
// this level: a product, then a sum, each rounded), so a row's sums do not depend on the rows
// beside it here either; rows run in groups whose accumulators stay in L1. A transposed B sums
// each dot product in eight explicit lanes (vectorisable without reordering) and reduces them in a
// fixed order.
template <class E>
void stream_rows_portable_t(int64_t M, int64_t K, const float* A, const void* Bv, int64_t ldb, bool trans,
                            int64_t nn, float* acc) {
  const auto* B = static_cast<const typename E::T*>(Bv);
  if (trans) {
    constexpr int64_t L = 8;
    const int64_t kl = K / L * L;
    for (int64_t j = 0; j < nn; ++j)
      for (int64_t m = 0; m < M; ++m) {
        const float* a = A + m * K;
        const typename E::T* b = B + j * ldb;
        float s[L] = {};
        for (int64_t k = 0; k < kl; k += L)
          for (int64_t l = 0; l < L; ++l) s[l] += a[k + l] * E::one(b + k + l);
        float t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
        for (int64_t k = kl; k < K; ++k) t += a[k] * E::one(b + k);
        acc[m * nn + j] += t;
      }
    return;
  }
  for (int64_t m0 = 0; m0 < M; m0 += kWideningStreamRows) {
    const int64_t rows = std::min(kWideningStreamRows, M - m0);
    for (int64_t k = 0; k < K; ++k) {
      const typename E::T* row = B + k * ldb;
      for (int64_t m = m0; m < m0 + rows; ++m) {
        const float a = A[m * K + k];
        float* out = acc + m * nn;
        for (int64_t j = 0; j < nn; ++j) out[j] += a * E::one(row + j);
      }
    }
  }
}

// acc[m][j] = Σ_k A[m][k] · B(k, j) (acc zeroed by the caller) at the level the CPU runs
// (cpu_features.h). B points at column j = 0 of the block (row j = 0 with trans).
void stream_block(NarrowType type, int64_t M, int64_t K, const float* A, const void* B, int64_t ldb, bool trans,
                  int64_t nn, float* acc) {
#if defined(__x86_64__)
  // The many-row kernels' scratch, kept per thread (each level decides from how many rows it tiles).
  thread_local std::vector<float> chunk;
  switch (cpu_isa()) {
    case CpuIsa::kAvx512:
      if (M > 1) chunk.resize(static_cast<size_t>(avx512::widening_scratch_floats(M, K)));
      return avx512::widening_block(type, M, K, A, B, ldb, trans, nn, acc, chunk.data());
    case CpuIsa::kAvx2:
      if (M > 1) chunk.resize(static_cast<size_t>(avx2::widening_scratch_floats(M, K)));
      return avx2::widening_block(type, M, K, A, B, ldb, trans, nn, acc, chunk.data());
    case CpuIsa::kBaseline: break;
  }
#endif
  note_kernel_level(CpuIsa::kBaseline);
  with_narrow(type, [&](auto e) { stream_rows_portable_t<decltype(e)>(M, K, A, B, ldb, trans, nn, acc); });
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
  // [K, cn] block with row stride ldb (rows of [N, K] with trans_b). Their accumulators stay in
  // L1 (decode) or L2 (prefill) while the weights stream through.
  thread_local std::vector<float> acc;
  for (int64_t col = n0; col < n0 + nn;) {
    ColumnSegment seg;
    if (trans_b) {
      seg = {bytes + static_cast<size_t>(col * K) * el, K, std::min(kPanelCols, n0 + nn - col)};
    } else {
      seg = column_segment(B, el, K, N, panel_cols, col);
      seg.width = std::min({seg.width, kPanelCols, n0 + nn - col});
    }
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
}

}  // namespace ftx::cpu
