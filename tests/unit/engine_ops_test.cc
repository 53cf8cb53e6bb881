// Op-level checks of the CPU backend that the end-to-end reference tests cannot pin down alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "formats/error.h"

#include "lib/cpu/cpu_backend.h"
#include "lib/ops/backend.h"
#include "lib/ops/host_math.h"

namespace ftx {
namespace {

// BLOOM's slopes (docs/runtime.md#the-models-math): 8 heads: 2^-1 .. 2^-8; 6 heads: n2 = 4 ->
// 2^-2, 2^-4, 2^-6, 2^-8, then the odd powers of 2^-1: 2^-1, 2^-3.
TEST(AlibiSlopes, PowerOfTwoAndOther) {
  auto s8 = ops::alibi_slopes(8);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(s8[h], std::pow(2.0f, -(h + 1.0f)));
  auto s6 = ops::alibi_slopes(6);
  const float want6[] = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  for (int h = 0; h < 6; ++h) EXPECT_FLOAT_EQ(s6[h], want6[h]);
}

// Weight conversion rounds to nearest even, as the converters and torch do: fp16 keeps 11 bits,
// bf16 8; 1 + 2^-11 is a tie in fp16 (even: down to 1), 1 + 3·2^-11 rounds up; overflow is inf.
TEST(ConvertWeight, RoundsToNearestEven) {
  const float in[] = {1.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -2.5f, 65504.0f, 1e6f, 1.0f + 0x1p-8f};
  const size_t n = sizeof(in) / sizeof(in[0]);
  std::vector<uint16_t> h(n), b(n);
  std::vector<float> hf(n), bf(n);
  ops::convert_weight(in, DType::kFloat32, h.data(), DType::kFloat16, n);
  ops::convert_weight(h.data(), DType::kFloat16, hf.data(), DType::kFloat32, n);
  ops::convert_weight(in, DType::kFloat32, b.data(), DType::kBFloat16, n);
  ops::convert_weight(b.data(), DType::kBFloat16, bf.data(), DType::kFloat32, n);
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(hf[1], 1.0f);
  EXPECT_EQ(hf[2], 1.0f + 4 * 0x1p-11f);
  EXPECT_EQ(hf[3], -2.5f);
  EXPECT_EQ(hf[4], 65504.0f);
  EXPECT_EQ(hf[5], std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf[0], 1.0f);
  EXPECT_EQ(bf[6], 1.0f);  // 1 + 2^-8 is a bf16 tie: even, down
  EXPECT_EQ(bf[5], 999424.0f);
  // fp16 -> bf16 goes through fp32; the same dtype is a copy.
  std::vector<uint16_t> hb(n), same(n);
  ops::convert_weight(h.data(), DType::kFloat16, hb.data(), DType::kBFloat16, n);
  EXPECT_EQ(hb[3], b[3]);
  ops::convert_weight(h.data(), DType::kFloat16, same.data(), DType::kFloat16, n);
  EXPECT_EQ(same, h);
  int8_t q[2] = {1, 2};
  float out[2];
  EXPECT_THROW(ops::convert_weight(q, DType::kInt8, out, DType::kFloat32, 2), Error);
}

// An fp32 CPU backend holds every weight in fp32: a half upload comes back widened. A half CPU
// backend (--dtype fp16|bf16) holds them in half (cpu_half_gemm_test.cc); int8 is no weight dtype.
TEST(CpuOps, HalfWeightsAreWidenedAtUpload) {
  cpu::CpuBackend be(1);
  EXPECT_EQ(be.weight_dtype(), DType::kFloat32);
  const float in[] = {0.1f, -3.0f, 96.5f};
  uint16_t h[3];
  ops::convert_weight(in, DType::kFloat32, h, DType::kFloat16, 3);
  const ops::Weight w = be.upload_weight(h, DType::kFloat16, 3);
  ASSERT_EQ(w.dtype, DType::kFloat32);
  const float* p = w.fp32();
  EXPECT_EQ(p[0], half_to_float(h[0]));
  EXPECT_EQ(p[1], -3.0f);
  EXPECT_EQ(p[2], 96.5f);
  be.release_weight(w);
  EXPECT_THROW(ops::Weight(h, DType::kFloat16).fp32(), Error);
  EXPECT_THROW(ops::KvCache(h, DType::kFloat16).fp32(), Error);  // nor a half KV cache
  EXPECT_EQ(ops::make_backend("cpu", 1, DType::kFloat16)->weight_dtype(), DType::kFloat16);
  EXPECT_THROW(ops::make_backend("cpu", 1, DType::kInt8), UsageError);
}

TEST(CpuOps, RotaryStylesRotateTheirPairs) {
  cpu::CpuBackend be(1);
  // One row, one head of 4 dims, rot_dim 4, position 1, base 1 (so every pair turns by 1 radian).
  const float c = std::cos(1.0f), s = std::sin(1.0f);
  int32_t pos = 1;
  float x[4] = {1, 2, 3, 4};
  be.rotary(x, 1, 4, &pos, 1, 4, 4, RotaryStyle::kInterleaved, 1.0);  // pairs (0,1), (2,3)
  EXPECT_NEAR(x[0], 1 * c - 2 * s, 1e-6);
  EXPECT_NEAR(x[1], 2 * c + 1 * s, 1e-6);
  EXPECT_NEAR(x[2], 3 * c - 4 * s, 1e-6);
  float y[4] = {1, 2, 3, 4};
  be.rotary(y, 1, 4, &pos, 1, 4, 4, RotaryStyle::kHalfSplit, 1.0);  // pairs (0,2), (1,3)
  EXPECT_NEAR(y[0], 1 * c - 3 * s, 1e-6);
  EXPECT_NEAR(y[2], 3 * c + 1 * s, 1e-6);
  EXPECT_NEAR(y[1], 2 * c - 4 * s, 1e-6);
}

TEST(CpuOps, GemmSingleRowMatchesMultiRow) {
  cpu::CpuBackend be(2);
  const int K = 5, N = 3;
  float A[2 * K], B[K * N], C1[N], C2[2 * N];
  for (int i = 0; i < 2 * K; ++i) A[i] = 0.1f * i - 0.3f;
  for (int i = 0; i < K * N; ++i) B[i] = 0.05f * i + 0.1f;
  for (bool tb : {false, true}) {
    be.gemm(1, N, K, A, B, tb, C1, 0.0f);
    be.gemm(2, N, K, A, B, tb, C2, 0.0f);
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += A[k] * (tb ? B[j * K + k] : B[k * N + j]);
      EXPECT_NEAR(C1[j], want, 1e-5);
      EXPECT_NEAR(C2[j], want, 1e-5);
    }
  }
}

TEST(CpuOps, GatedActivations) {
  cpu::CpuBackend be(1);
  float x[2] = {1.0f, -2.0f};
  const float gate[2] = {3.0f, 0.5f};
  be.bias_activation(x, nullptr, gate, nullptr, 1, 2, Activation::kSwiGlu);
  EXPECT_NEAR(x[0], 1.0f / (1.0f + std::exp(-1.0f)) * 3.0f, 1e-6);
  EXPECT_NEAR(x[1], -2.0f / (1.0f + std::exp(2.0f)) * 0.5f, 1e-6);
}

// Without CUDA in the build, or without a device at run time, asking for cuda is a clear error.
TEST(Backend, CudaWithoutDeviceIsAClearError) {
#ifdef FTX_HAVE_CUDA
  const std::string expected = "no CUDA device found";
#else
  const std::string expected = "the CUDA backend is not built in this version";
#endif
  try {
    ops::make_backend("cuda", 1);
#ifdef FTX_HAVE_CUDA
    GTEST_SKIP() << "a CUDA device is present";
#else
    FAIL() << "expected an error";
#endif
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ftx
