// RMSNorm on the CPU (Megatron Core / NeMo `normalization: RMSNorm`) against torch.nn.RMSNorm's
// formula in double, and the fused residual step against its two parts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lib/cpu/cpu_backend.h"

namespace ftx {
namespace {

TEST(CpuRmsNorm, MatchesDoubleFormula) {
  cpu::CpuBackend be(1);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 5.0f);
  for (int64_t H : {1, 7, 64, 1000}) {
    const int64_t rows = 3;
    std::vector<float> x(rows * H), g(H), out(rows * H);
    for (auto& v : x) v = u(rng);
    for (auto& v : g) v = u(rng);
    be.rms_norm(out.data(), x.data(), g.data(), rows, H, 1e-5f);
    for (int64_t r = 0; r < rows; ++r) {
      double ms = 0;
      for (int64_t i = 0; i < H; ++i) ms += double(x[r * H + i]) * x[r * H + i];
      const double inv = 1.0 / std::sqrt(ms / H + 1e-5);
      for (int64_t i = 0; i < H; ++i) {
        const double want = x[r * H + i] * inv * g[i];
        ASSERT_NEAR(out[r * H + i], want, 1e-6 * std::max(1.0, std::fabs(want))) << "H " << H;
      }
    }
  }
}

TEST(CpuRmsNorm, ResidualThenNorm) {
  cpu::CpuBackend be(1);
  const int64_t rows = 2, H = 33;
  std::vector<float> x(rows * H), y(rows * H), b(H), g(H), out(rows * H), want_x, want(rows * H);
  for (int64_t i = 0; i < rows * H; ++i) x[i] = 0.1f * float(i % 11) - 0.4f, y[i] = 0.05f * float(i % 5);
  for (int64_t i = 0; i < H; ++i) b[i] = 0.01f * float(i), g[i] = 1.0f + 0.02f * float(i);
  want_x = x;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < H; ++i) want_x[r * H + i] += y[r * H + i] + b[i];
  be.rms_norm(want.data(), want_x.data(), g.data(), rows, H, 1e-6f);
  be.add_residual_rms_norm(x.data(), y.data(), b.data(), g.data(), out.data(), rows, H, 1e-6f);
  EXPECT_EQ(x, want_x);
  EXPECT_EQ(out, want);
}

}  // namespace
}  // namespace ftx
