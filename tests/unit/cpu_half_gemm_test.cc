// One GEMM of the CPU backend with fp16/bf16 (and int8) weights against a double-precision
// evaluation of Backend::gemm's contract written from its formula: A rounded to the weights'
// dtype (round to nearest even), B as held, products summed exactly (double), C = A·B + beta·C.
// Both sides round the same fp32 A, so only the engine's fp32 sums differ: 1e-5 x the largest
// |C| of the case. Covered: the streaming kernels (rows <= 8) and the many-row paths (oneDNN for
// bf16, widened panels for fp16), [K,N] and transposed [N,K] weights, widths that are not a
// multiple of the 64-column block and depths that are not a multiple of 16, beta 0 and 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "lib/cpu/cpu_backend.h"

namespace ftx {
namespace {

double round_to(DType t, float v) {
  return t == DType::kBFloat16 ? bf16_to_float(float_to_bf16(v)) : half_to_float(float_to_half(v));
}

struct Case {
  int64_t M, N, K;
  bool trans;
  float beta;
};

class HalfGemm : public ::testing::TestWithParam<DType> {};

TEST_P(HalfGemm, MatchesRoundedOperandsSummedExactly) {
  const DType dt = GetParam();
  cpu::CpuBackend be(2, dt);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Case cases[] = {{1, 200, 72, false, 0}, {3, 130, 64, true, 0}, {8, 1000, 33, false, 1}, {9, 300, 100, false, 0},
                        {9, 301, 70, true, 0},  {40, 257, 96, false, 1}, {64, 129, 48, true, 1}, {1, 5000, 64, true, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K << " trans=" << c.trans
                                      << " beta=" << c.beta);
    std::vector<float> a(c.M * c.K), w(c.K * c.N), out(c.M * c.N);
    for (auto& v : a) v = nd(rng);
    for (auto& v : w) v = 0.1f * nd(rng);
    for (auto& v : out) v = nd(rng);
    const std::vector<float> before = out;
    const ops::Weight B = be.upload_weight(w.data(), DType::kFloat32, w.size());
    ASSERT_EQ(B.dtype, dt);
    be.gemm(c.M, c.N, c.K, a.data(), B, c.trans, out.data(), c.beta);
    // B as held: the matrix rounded to dt; with trans it is stored [N, K].
    std::vector<double> want(c.M * c.N);
    double scale = 1e-30;
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < c.K; ++k)
          s += round_to(dt, a[m * c.K + k]) * round_to(dt, c.trans ? w[n * c.K + k] : w[k * c.N + n]);
        want[m * c.N + n] = s + c.beta * before[m * c.N + n];
        scale = std::max(scale, std::fabs(want[m * c.N + n]));
      }
    double worst = 0, unrounded = 0;
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        worst = std::max(worst, std::fabs(out[m * c.N + n] - want[m * c.N + n]));
        // The same product without rounding A: what a kernel that skipped the rounding would give.
        double s = 0;
        for (int64_t k = 0; k < c.K; ++k)
          s += static_cast<double>(a[m * c.K + k]) * round_to(dt, c.trans ? w[n * c.K + k] : w[k * c.N + n]);
        unrounded = std::max(unrounded, std::fabs(s + c.beta * before[m * c.N + n] - want[m * c.N + n]));
      }
    EXPECT_LE(worst, 1e-5 * scale);
    EXPECT_GT(unrounded, 3e-5 * scale) << "the case cannot tell a rounded A from an unrounded one";
    be.release_weight(B);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfGemm, ::testing::Values(DType::kBFloat16, DType::kFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Weights are held in the dtype: the embedding lookup widens the stored (rounded) row exactly.
TEST(HalfEmbedding, RowIsTheRoundedTableRow) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    cpu::CpuBackend be(1, dt);
    std::vector<float> table(4 * 3);
    for (size_t i = 0; i < table.size(); ++i) table[i] = 0.1f * static_cast<float>(i) + 0.0123f;
    const ops::Weight t = be.upload_weight(table.data(), DType::kFloat32, table.size());
    const int32_t ids[] = {2, 0}, pos[] = {0, 1};
    std::vector<float> out(2 * 3);
    be.embedding(out.data(), t, nullptr, ops::PositionTable::kNone, 0, ids, pos, 2, 3, 2.0f);
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(out[r * 3 + i], static_cast<float>(2.0 * round_to(dt, table[ids[r] * 3 + i])));
    be.release_weight(t);
  }
}

}  // namespace
}  // namespace ftx
