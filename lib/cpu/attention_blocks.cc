#include "lib/cpu/attention_blocks.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "lib/cpu/simd_math.h"

namespace ftx::cpu {

void attend_block(const AttentionBlock& b, std::vector<float>& scratch) {
  // Keys [lo, pos0 + rows): the window's start for the first query (0 without one); b.k may hold earlier ones.
  const int64_t lo = first_key(b.pos0, b.window);
  const int64_t n = b.pos0 + b.rows - lo;  // keys the last query sees, from lo
  const float* k = b.k + (lo - b.key0) * b.d;
  const float* v = b.v + (lo - b.key0) * b.d;
  scratch.resize(static_cast<size_t>(b.rows * n));
  float* p = scratch.data();
  // scores[i][s - lo] = scale · q_i·k_s
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(b.rows), static_cast<int>(n),
              static_cast<int>(b.d), b.scale, b.q, static_cast<int>(b.ldq), k, static_cast<int>(b.d), 0.0f, p,
              static_cast<int>(n));
  for (int64_t i = 0; i < b.rows; ++i) {
    float* row = p + i * n;
    const int64_t pos = b.pos0 + i, seen = pos + 1 - lo;  // row[s] is key lo + s
    // Keys behind this query's window (none without one) weigh nothing, as later keys (the causal mask).
    const int64_t from = b.window > 0 ? std::max<int64_t>(0, pos - b.window + 1 - lo) : 0;
    if (b.softcap > 0.0f)
      for (int64_t s = from; s < seen; ++s) row[s] = b.softcap * std::tanh(row[s] / b.softcap);
    if (b.slope != 0.0f)
      for (int64_t s = from; s < seen; ++s) row[s] += b.slope * static_cast<float>(lo + s - pos);
    float mx = -INFINITY;
    for (int64_t s = from; s < seen; ++s) mx = std::max(mx, row[s]);
    const float inv = 1.0f / exp_shifted_sum(row + from, mx, seen - from);
    for (int64_t s = from; s < seen; ++s) row[s] *= inv;
    std::fill(row, row + from, 0.0f);
    std::fill(row + seen, row + n, 0.0f);  // the causal mask: later keys weigh nothing
  }
  // out_i = Σ_s p[i][s] · v_s
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(b.rows), static_cast<int>(b.d),
              static_cast<int>(n), 1.0f, p, static_cast<int>(n), v, static_cast<int>(b.d), 0.0f, b.out,
              static_cast<int>(b.ldo));
}

}  // namespace ftx::cpu
