// The CPU backend's FP8 GEMM (--fp8) against a double-precision evaluation of the FP8 arithmetic of
// lib/ops/backend.h written from its formula: A quantised to E4M3 with the static scale (x · fp32(1/s_x),
// rounded by float_to_e4m3, itself checked against ml_dtypes in fp8_e4m3_test), the E4M3
// weights as uploaded, products summed exactly (double), times fp32(s_x · s_w), plus beta·C. Only the
// engine's fp32 sums differ: 1e-5 × the largest |C| of the case. Covered: one row, the streaming
// kernel (2..16 rows), more rows (the AVX-512 tile kernel, or widened panels and sgemm without
// AVX-512), widths across column panels and not a multiple of 16, beta 0 and 1; and a kernel that
// skipped quantising A is told apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "formats/fp8_e4m3.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/quant/fp8.h"

namespace ftx {
namespace {

struct Case {
  int64_t M, N, K;
  float beta;
};

TEST(CpuFp8Gemm, MatchesTheFp8ArithmeticSummedExactly) {
  cpu::CpuBackend be(2);
  std::mt19937 rng(29);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Case cases[] = {{1, 200, 72, 0}, {3, 130, 64, 0}, {8, 1000, 33, 1}, {16, 300, 100, 0}, {17, 301, 70, 0},
                        {40, 257, 96, 1}, {1, 777, 1024, 0}, {5, 520, 31, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K << " beta=" << c.beta);
    std::vector<float> a(c.M * c.K), w(c.K * c.N), out(c.M * c.N);
    for (auto& v : a) v = 3.0f * nd(rng);
    for (auto& v : w) v = 0.1f * nd(rng);
    for (auto& v : out) v = nd(rng);
    const std::vector<float> before = out;
    // The export's scales: amax / 448 of the weights and (here) of this A.
    float w_max = 0, a_max = 0;
    for (float v : w) w_max = std::max(w_max, std::fabs(v));
    for (float v : a) a_max = std::max(a_max, std::fabs(v));
    const float s_w = quant::fp8_scale_of(w_max), s_x = quant::fp8_scale_of(a_max * 0.8);  // some saturate
    std::vector<uint8_t> q(w.size());
    quant::quantize_e4m3(w.data(), w.size(), s_w, q.data());
    const ops::Weight B = be.upload_weight_fp8(q.data(), c.K, c.N, s_x, s_w);
    ASSERT_EQ(B.dtype, DType::kFloat8E4M3);
    be.gemm(c.M, c.N, c.K, a.data(), B, false, out.data(), c.beta);
    const float inv = 1.0f / s_x;
    const double alpha = static_cast<float>(s_x * s_w);
    double scale = 1e-30, worst = 0, unquantised = 0;
    std::vector<double> want(c.M * c.N);
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double s = 0, u = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double qw = e4m3_to_float(q[k * c.N + n]);
          s += e4m3_to_float(float_to_e4m3(a[m * c.K + k] * inv)) * qw;
          u += static_cast<double>(a[m * c.K + k] * inv) * qw;
        }
        want[m * c.N + n] = s * alpha + c.beta * before[m * c.N + n];
        scale = std::max(scale, std::fabs(want[m * c.N + n]));
        unquantised = std::max(unquantised, std::fabs(u * alpha + c.beta * before[m * c.N + n] - want[m * c.N + n]));
      }
    for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - want[i]));
    EXPECT_LE(worst, 1e-5 * scale);
    EXPECT_GT(unquantised, 100 * 1e-5 * scale) << "the check could not tell an unquantised A apart";
    be.release_weight(B);
  }
}

}  // namespace
}  // namespace ftx
