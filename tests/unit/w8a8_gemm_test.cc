// The CPU W8A8 GEMM's steps (lib/cpu/w8a8_gemm.h) on hand-computed values: rounding half to even
// and saturation, per-token scales (a zero row included), the oneDNN int32 product against a plain
// loop, and the dequantisation.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/w8a8_gemm.h"

namespace ftx::cpu {
namespace {

TEST(W8A8Gemm, PerTensorRoundsHalfToEvenAndSaturates) {
  // x · 2: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.75·2 = 1.5 -> 2, 200 -> 127, -200 -> -128.
  const std::vector<float> x = {1.25f, 1.75f, -1.25f, 0.75f, 100.0f, -100.0f};
  std::vector<int8_t> q(x.size());
  quantize_per_tensor(x.data(), 6, 2.0f, q.data());
  EXPECT_EQ(q, (std::vector<int8_t>{2, 4, -2, 2, 127, -128}));
}

TEST(W8A8Gemm, PerTokenScalesEachRowByItsMax) {
  // Row 0: amax 2, s = 63.5: (1, -2, 0.5) -> (63.5 -> 64, -127, 31.75 -> 32); row 1 all zero.
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 0.0f, 0.0f, 0.0f};
  std::vector<int8_t> q(6);
  float alpha[2];
  quantize_per_token(x.data(), 2, 3, q.data(), alpha);
  EXPECT_EQ(q, (std::vector<int8_t>{64, -127, 32, 0, 0, 0}));
  EXPECT_FLOAT_EQ(alpha[0], 2.0f / 127.0f);
  EXPECT_EQ(alpha[1], 0.0f);
}

TEST(W8A8Gemm, Int32ProductEqualsLoop) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(-128, 127);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 96, 64}, {7, 33, 200}, {16, 256, 64}}) {
    std::vector<int8_t> a(M * K), w(K * N);
    for (auto& v : a) v = static_cast<int8_t>(d(rng));
    for (auto& v : w) v = static_cast<int8_t>(d(rng));
    std::vector<int32_t> got(M * N);
    int8_matmul_s32(M, N, K, a.data(), w.data(), got.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int32_t s = 0;
        for (int64_t k = 0; k < K; ++k) s += int32_t{a[m * K + k]} * int32_t{w[k * N + n]};
        ASSERT_EQ(got[m * N + n], s) << M << "x" << N << "x" << K << " at " << m << "," << n;
      }
  }
}

TEST(W8A8Gemm, WholeGemmThroughTheBackend) {
  // A = [[1, -2]], per-tensor act_scale 10: q = (10, -20); W q = [[1, 2], [3, -4]]: acc = (-50, 100);
  // out_scale 0.5, alpha_col (0.1, 0.01): C = (-2.5, 0.5), plus beta · C = 1 · (1, 1).
  CpuBackend be(1);
  const int8_t wq[4] = {1, 2, 3, -4};
  const float alpha[2] = {0.1f, 0.01f};
  const ops::Weight w = be.upload_weight_w8a8(wq, 2, 2, alpha, 10.0f, 0.5f);
  float a[2] = {1.0f, -2.0f}, c[2] = {1.0f, 1.0f};
  be.gemm(1, 2, 2, a, w, false, c, 1.0f);
  EXPECT_FLOAT_EQ(c[0], -50.0f * (0.5f * 0.1f) + 1.0f);
  EXPECT_FLOAT_EQ(c[1], 100.0f * (0.5f * 0.01f) + 1.0f);
  be.release_weight(w);
}

}  // namespace
}  // namespace ftx::cpu
