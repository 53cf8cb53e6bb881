#include "lib/cpu/int8_gemm.h"

#include <cblas.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <vector>

namespace ftx::cpu {

namespace {

constexpr int64_t kStreamRows = 8;     // up to this many rows: the streaming kernel
constexpr int64_t kPanelCols = 256;    // widened panel width for the sgemm path

// acc[m][j] += A[m][k] · q[k][j] over k, for m < M ≤ kStreamRows and j < nn. The int8→fp32
// widening and the multiply-add vectorise; target_clones picks AVX-512 (x86-64-v4) or AVX2+FMA (v3) at load time.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void stream_rows(int64_t M, int64_t K, const float* A, int64_t lda, const int8_t* q, int64_t ldq, int64_t nn,
                 float* acc) {
  for (int64_t k = 0; k < K; ++k) {
    const int8_t* row = q + k * ldq;
    for (int64_t m = 0; m < M; ++m) {
      const float a = A[m * lda + k];
      float* out = acc + m * nn;
      for (int64_t j = 0; j < nn; ++j) out[j] += a * static_cast<float>(row[j]);
    }
  }
}

#if defined(__x86_64__)
// The same product with AVX-512 by hand: the compiler's version above keeps acc in memory, so
// every k loads and stores the accumulators and the kernel ends up bound by L1 traffic, not by the
// weights it streams. Here each 64-column block keeps R rows x 4 zmm sums in registers for the
// whole K loop; a k reads one 64-byte line of q (widened int8 -> int32 -> fp32) and does 4·R
// FMAs. Sums run over k in the same order as the portable version.
template <int R>
__attribute__((target("avx512f"))) void stream_rows_avx512(int64_t K, const float* A, int64_t lda, const int8_t* q,
                                                           int64_t ldq, int64_t nn, float* acc, int64_t ldacc) {
  int64_t j = 0;
  for (; j + 64 <= nn; j += 64) {
    __m512 s[R][4];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 4; ++c) s[r][c] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
      const int8_t* row = q + k * ldq + j;
      __m512 w[4];
      for (int c = 0; c < 4; ++c)
        w[c] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * c))));
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(A[r * lda + k]);
        for (int c = 0; c < 4; ++c) s[r][c] = _mm512_fmadd_ps(a, w[c], s[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(acc + r * ldacc + j + 16 * c, s[r][c]);
  }
  for (; j < nn; ++j)  // the last < 64 columns
    for (int r = 0; r < R; ++r) {
      float t = 0.0f;
      for (int64_t k = 0; k < K; ++k) t += A[r * lda + k] * static_cast<float>(q[k * ldq + j]);
      acc[r * ldacc + j] = t;
    }
}

bool has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

// acc[m][j] = sum_k A[m][k] · q[k][j] (acc zeroed by the caller), the fastest way the CPU allows.
void stream_block(int64_t M, int64_t K, const float* A, const int8_t* q, int64_t ldq, int64_t nn, float* acc) {
#if defined(__x86_64__)
  if (has_avx512f()) {
    for (int64_t m0 = 0; m0 < M; m0 += 4) {  // four rows at a time: 16 accumulators + 4 weights
      const float* a = A + m0 * K;
      float* out = acc + m0 * nn;
      switch (std::min<int64_t>(4, M - m0)) {
        case 1: stream_rows_avx512<1>(K, a, K, q, ldq, nn, out, nn); break;
        case 2: stream_rows_avx512<2>(K, a, K, q, ldq, nn, out, nn); break;
        case 3: stream_rows_avx512<3>(K, a, K, q, ldq, nn, out, nn); break;
        default: stream_rows_avx512<4>(K, a, K, q, ldq, nn, out, nn); break;
      }
    }
    return;
  }
#endif
  stream_rows(M, K, A, K, q, ldq, nn, acc);
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void widen_panel(int64_t K, const int8_t* q, int64_t ldq, int64_t nn, const float* scale, float* panel) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < nn; ++j) panel[k * nn + j] = static_cast<float>(q[k * ldq + j]) * scale[j];
}

}  // namespace

void int8_weight_gemm_block(int64_t M, int64_t N, int64_t K, const float* A, const int8_t* q, const float* scale,
                            float* C, float beta, int64_t n0, int64_t nn) {
  if (M <= kStreamRows) {
    // Column chunks keep the M accumulator rows in L1 while the weights stream through.
    thread_local std::vector<float> acc;
    for (int64_t c0 = 0; c0 < nn; c0 += kPanelCols) {
      const int64_t cn = std::min(kPanelCols, nn - c0), col = n0 + c0;
      acc.assign(static_cast<size_t>(M * cn), 0.0f);
      stream_block(M, K, A, q + col, N, cn, acc.data());
      for (int64_t m = 0; m < M; ++m) {
        float* c = C + m * N + col;
        const float* a = acc.data() + m * cn;
        for (int64_t j = 0; j < cn; ++j) c[j] = a[j] * scale[col + j] + (beta != 0.0f ? beta * c[j] : 0.0f);
      }
    }
    return;
  }
  thread_local std::vector<float> panel;
  for (int64_t c0 = 0; c0 < nn; c0 += kPanelCols) {
    const int64_t cn = std::min(kPanelCols, nn - c0), col = n0 + c0;
    panel.resize(static_cast<size_t>(K * cn));
    widen_panel(K, q + col, N, cn, scale + col, panel.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, cn, K, 1.0f, A, K, panel.data(), cn, beta, C + col, N);
  }
}

}  // namespace ftx::cpu
