#include "lib/cpu/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/cpu/cpu_backend.h"

namespace ftx::cpu {

void moe_route(const float* logits, int64_t experts, int64_t top_k, MoeRouting routing, MoeChoice* out) {
  const float top = *std::max_element(logits, logits + experts);
  std::vector<double> e(static_cast<size_t>(experts));
  double sum = 0.0;
  for (int64_t i = 0; i < experts; ++i) sum += e[i] = std::exp(static_cast<double>(logits[i]) - top);
  std::vector<float> p(static_cast<size_t>(experts));
  for (int64_t i = 0; i < experts; ++i) p[i] = static_cast<float>(e[i] / sum);
  std::vector<int32_t> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  // A stable sort keeps equal probabilities in expert order.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  double chosen = 0.0;
  for (int64_t k = 0; k < top_k; ++k) chosen += p[order[k]];
  for (int64_t k = 0; k < top_k; ++k) {
    const float w = p[order[k]];
    out[k] = {order[k], routing == MoeRouting::kSoftmaxTopKRenorm ? w / static_cast<float>(chosen) : w};
  }
}

namespace {

// Step 5 of Backend::moe_ffn before its sum: w[r] · s[r] for every row, read from `in` before the
// routed sum writes `out` (which may be `in`).
std::vector<float> weighed_shared_expert(CpuBackend& be, const float* in, int64_t rows, const ops::MoeLayer& m) {
  const int64_t H = m.hidden, I = m.shared_inter;
  FTX_CHECK(m.shared_fc && m.shared_proj && static_cast<bool>(m.shared_gate) == m.act.is_gated(), "moe_ffn",
            "the shared expert needs fc and proj weights, and gate weights exactly when its activation is gated");
  std::vector<float> a(static_cast<size_t>(rows * I)), g, s(static_cast<size_t>(rows * H)), w;
  be.gemm(rows, I, H, in, m.shared_fc, false, a.data(), 0.0f);
  if (m.shared_gate) {
    g.resize(a.size());
    be.gemm(rows, I, H, in, m.shared_gate, false, g.data(), 0.0f);
  }
  be.bias_activation(a.data(), nullptr, m.shared_gate ? ops::Act(g.data()) : ops::Act(), nullptr, rows, I, m.act);
  be.gemm(rows, H, I, a.data(), m.shared_proj, false, s.data(), 0.0f);
  if (m.shared_weigher) {
    w.resize(static_cast<size_t>(rows));
    be.gemm(rows, 1, H, in, m.shared_weigher, false, w.data(), 0.0f);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float weight = m.shared_weigher ? 1.0f / (1.0f + std::exp(-w[r])) : 1.0f;
    for (int64_t h = 0; h < H; ++h) s[r * H + h] *= weight;
  }
  return s;
}

}  // namespace

void moe_ffn(CpuBackend& be, float* out, const float* in, int64_t rows, const ops::MoeLayer& m) {
  const int64_t H = m.hidden, I = m.inter, E = m.experts, K = m.top_k;
  FTX_CHECK(H > 0 && I > 0 && E > 0 && K >= 1 && K <= E, "moe_ffn",
            "hidden " + std::to_string(H) + ", inter " + std::to_string(I) + ", experts " + std::to_string(E) +
                ", top_k " + std::to_string(K) + ": top_k must be in [1, experts]");
  FTX_CHECK(m.fc && m.proj && m.router && (m.gate != nullptr) == m.act.is_gated(), "moe_ffn",
            "the layer needs a router, fc and proj weights, and gate weights exactly when its activation is gated");
  const int64_t first = m.expert_begin, held = m.local_experts();
  FTX_CHECK(first >= 0 && m.expert_count >= 0 && first + held <= E, "moe_ffn",
            "experts [" + std::to_string(first) + ", " + std::to_string(first + held) + ") held of " + std::to_string(E));
  if (rows <= 0) return;
  std::vector<float> logits(static_cast<size_t>(rows * E));
  be.gemm(rows, E, H, in, m.router, false, logits.data(), 0.0f);
  std::vector<MoeChoice> choice(static_cast<size_t>(rows * K));
  for (int64_t r = 0; r < rows; ++r) moe_route(logits.data() + r * E, E, K, m.routing, choice.data() + r * K);

  // Each held expert's slots (row · K + k), in row order; the other experts' are another rank's.
  std::vector<std::vector<int64_t>> slots(static_cast<size_t>(held));
  for (int64_t s = 0; s < rows * K; ++s)
    if (m.holds(choice[s].expert)) slots[choice[s].expert - first].push_back(s);
  std::vector<float> y(static_cast<size_t>(rows * K * H));  // each held slot's expert output
  std::vector<float> x, a, g, o;
  for (int64_t e = 0; e < held; ++e) {
    const std::vector<int64_t>& rs = slots[e];
    const int64_t n = static_cast<int64_t>(rs.size());
    if (n == 0) continue;
    x.resize(static_cast<size_t>(n * H));
    a.resize(static_cast<size_t>(n * I));
    o.resize(static_cast<size_t>(n * H));
    for (int64_t i = 0; i < n; ++i) std::memcpy(&x[i * H], in + (rs[i] / K) * H, sizeof(float) * H);
    be.gemm(n, I, H, x.data(), m.fc[e], false, a.data(), 0.0f);
    if (m.gate) {
      g.resize(static_cast<size_t>(n * I));
      be.gemm(n, I, H, x.data(), m.gate[e], false, g.data(), 0.0f);
    }
    be.bias_activation(a.data(), m.fc_bias ? m.fc_bias + (first + e) * I : nullptr, m.gate ? ops::Act(g.data()) : ops::Act(),
                       nullptr, n, I, m.act);
    be.gemm(n, H, I, a.data(), m.proj[e], false, o.data(), 0.0f);
    if (m.proj_bias) be.add_bias(o.data(), m.proj_bias + (first + e) * H, n, H);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&y[rs[i] * H], &o[i * H], sizeof(float) * H);
  }
  const std::vector<float> shared = m.shared_inter > 0 ? weighed_shared_expert(be, in, rows, m) : std::vector<float>{};
#pragma omp parallel for schedule(static) if (rows * H >= 65536)
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = out + r * H;
    std::fill(dst, dst + H, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      if (!m.holds(choice[r * K + k].expert)) continue;
      const float w = choice[r * K + k].weight;
      const float* src = &y[(r * K + k) * H];
      for (int64_t h = 0; h < H; ++h) dst[h] += w * src[h];
    }
  }
  for (size_t i = 0; i < shared.size(); ++i) out[i] += shared[i];
}

}  // namespace ftx::cpu
