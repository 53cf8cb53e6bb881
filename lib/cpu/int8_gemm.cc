#include "lib/cpu/int8_gemm.h"

#include <cblas.h>

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
      stream_rows(M, K, A, K, q + col, N, cn, acc.data());
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
