#include "lib/cpu/attention_blocks.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "lib/cpu/simd_math.h"

namespace ftx::cpu {

void attend_block(const AttentionBlock& b, std::vector<float>& scratch) {
  const int64_t n = b.pos0 + b.rows;  // keys the last query sees
  scratch.resize(static_cast<size_t>(b.rows * n));
  float* p = scratch.data();
  // scores[i][s] = scale · q_i·k_s
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(b.rows), static_cast<int>(n),
              static_cast<int>(b.d), b.scale, b.q, static_cast<int>(b.ldq), b.k, static_cast<int>(b.d), 0.0f, p,
              static_cast<int>(n));
  for (int64_t i = 0; i < b.rows; ++i) {
    float* row = p + i * n;
    const int64_t pos = b.pos0 + i, seen = pos + 1;
    if (b.slope != 0.0f)
      for (int64_t s = 0; s < seen; ++s) row[s] += b.slope * static_cast<float>(s - pos);
    float mx = -INFINITY;
    for (int64_t s = 0; s < seen; ++s) mx = std::max(mx, row[s]);
    const float inv = 1.0f / exp_shifted_sum(row, mx, seen);
    for (int64_t s = 0; s < seen; ++s) row[s] *= inv;
    std::fill(row + seen, row + n, 0.0f);  // the causal mask: later keys weigh nothing
  }
  // out_i = Σ_s p[i][s] · v_s
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(b.rows), static_cast<int>(b.d),
              static_cast<int>(n), 1.0f, p, static_cast<int>(n), b.v, static_cast<int>(b.d), 0.0f, b.out,
              static_cast<int>(b.ldo));
}

}  // namespace ftx::cpu
