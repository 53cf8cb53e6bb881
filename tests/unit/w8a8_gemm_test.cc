// The CPU W8A8 GEMM's steps (lib/cpu/w8a8_gemm.h) on hand-computed values: rounding half to even
// and saturation, per-token scales (a zero row included), the packed VNNI int32 product against a
// plain loop (masked column tails, K not a multiple of 4, several panels, every row-group shape),
// and the dequantisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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

// The definition, one value at a time: round half to even, saturate, NaN -> 0 (cvt.rni.sat.s8.f32).
int8_t to_int8_definition(float v) {
  if (std::isnan(v)) return 0;
  return static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, std::nearbyint(v))));
}

TEST(W8A8Gemm, VectorQuantiserEqualsTheDefinitionOnEveryKindOfValue) {
  // Halves on both sides of the saturation bounds, infinities, NaN, values beyond int32's range,
  // denormals, and lengths that end inside a 16-lane vector.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {126.5f, 127.49f, 127.5f, 128.0f, -127.5f, -128.49f, -128.5f, -129.0f, 0.5f, 1.5f,
                                -0.5f, -1.5f, 2.5f, nan, inf, -inf, 3e9f, -3e9f, 1e-40f, -0.0f};
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 60.0f);
  for (int64_t n : {1, 15, 16, 17, 31, 100, 1000}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = i < static_cast<int64_t>(special.size()) && n >= 20 ? special[i] : d(rng);
    for (float scale : {1.0f, 0.37f, 2.0f}) {
      std::vector<int8_t> q(n + 1, 42);  // one guard byte past the end
      quantize_per_tensor(x.data(), n, scale, q.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(q[i], to_int8_definition(x[i] * scale)) << n << " at " << i << ": " << x[i];
      EXPECT_EQ(q[n], 42) << "wrote past the end, n = " << n;
    }
    // Per token: NaN is ignored by the row's amax, as std::max ignores it.
    std::vector<int8_t> q(n);
    float alpha = -1.0f;
    quantize_per_token(x.data(), 1, n, q.data(), &alpha);
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(alpha, amax / 127.0f) << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(q[i], to_int8_definition(x[i] * (127.0f / amax))) << n << " at " << i;
  }
}

TEST(W8A8Gemm, Int32ProductEqualsLoop) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(-128, 127);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 96, 64}, {7, 33, 200}, {16, 256, 64}, {1, 600, 201},
                         {2, 300, 7}, {3, 17, 1024}, {4, 513, 30}, {5, 70, 3}, {9, 280, 66}}) {
    std::vector<int8_t> a(M * K), w(K * N);
    for (auto& v : a) v = static_cast<int8_t>(d(rng));
    for (auto& v : w) v = static_cast<int8_t>(d(rng));
    a[0] = w[0] = -128;  // the extremes: -128 · -128 and the +128 offset of the packed weights
    a.back() = w.back() = 127;
    std::vector<int32_t> got(M * N);
    int8_matmul_s32(M, N, K, a.data(), w.data(), got.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int32_t s = 0;
        for (int64_t k = 0; k < K; ++k) s += int32_t{a[m * K + k]} * int32_t{w[k * N + n]};
        ASSERT_EQ(got[m * N + n], s) << M << "x" << N << "x" << K << " at " << m << "," << n;
      }
    // The portable path (CPUs without AVX512-VNNI) on the same packed weights, over a column range
    // that starts inside a panel.
    std::vector<uint8_t> packed(vnni_packed_bytes(K, N));
    pack_int8_vnni(w.data(), K, N, packed.data());
    const int64_t K4 = vnni_padded_k(K), n0 = N / 3;
    std::vector<int8_t> a4(M * K4, 0);
    std::vector<int32_t> sums(M, 0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) a4[m * K4 + k] = a[m * K + k], sums[m] += a[m * K + k];
    std::vector<int32_t> fast((N - n0) * M), slow((N - n0) * M);
    vnni_int8_product({a4.data(), sums.data(), M, K}, packed.data(), N, n0, N - n0, fast.data());
    vnni_int8_product_portable({a4.data(), sums.data(), M, K}, packed.data(), N, n0, N - n0, slow.data());
    EXPECT_EQ(fast, slow) << M << "x" << N << "x" << K;
    for (int64_t m = 0; m < M; ++m) EXPECT_EQ(fast[m * (N - n0)], got[m * N + n0]) << M << "x" << N << "x" << K;
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

// The backend's GEMM (activations quantised into the padded operand, panels split across two
// threads, the int32 sums scaled back per panel) equals the three steps run one after another on
// plain row-major data, bit for bit, per tensor and per token, with and without beta.
TEST(W8A8Gemm, BackendEqualsTheStepsOnRandomShapes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> d(-128, 127);
  std::normal_distribution<float> x(0.0f, 2.0f);
  CpuBackend be(2);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1000, 300}, {6, 520, 129}, {20, 770, 64}}) {
    std::vector<int8_t> wq(K * N);
    for (auto& v : wq) v = static_cast<int8_t>(d(rng));
    std::vector<float> alpha(N), A(M * K), C0(M * N);
    for (auto& v : alpha) v = std::uniform_real_distribution<float>(1e-3f, 2e-2f)(rng);
    for (auto& v : A) v = x(rng);
    for (auto& v : C0) v = x(rng);
    for (float act_scale : {0.0f, 9.5f})
      for (float beta : {0.0f, 1.0f}) {
        std::vector<int8_t> qa(M * K);
        std::vector<float> row(M);
        if (act_scale > 0)
          quantize_per_tensor(A.data(), M * K, act_scale, qa.data());
        else
          quantize_per_token(A.data(), M, K, qa.data(), row.data());
        std::vector<int32_t> acc(M * N, 0);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < K; ++k)
            for (int64_t n = 0; n < N; ++n) acc[m * N + n] += int32_t{qa[m * K + k]} * int32_t{wq[k * N + n]};
        std::vector<float> want = C0, got = C0;
        dequantize_int32(acc.data(), M, N, act_scale > 0 ? nullptr : row.data(), 0.25f, alpha.data(), want.data(), beta);
        const ops::Weight w = be.upload_weight_w8a8(wq.data(), K, N, alpha.data(), act_scale, 0.25f);
        be.gemm(M, N, K, A.data(), w, false, got.data(), beta);
        be.release_weight(w);
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_EQ(got[i], want[i]) << M << "x" << N << "x" << K << " act_scale " << act_scale << " beta " << beta
                                     << " at " << i;
      }
  }
}

}  // namespace
}  // namespace ftx::cpu
