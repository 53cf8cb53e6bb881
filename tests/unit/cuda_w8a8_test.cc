// SmoothQuant W8A8 on CUDA (label gpu; skips without a device, see gpu_test_util.h): each kernel of
// kernels/quantization/ against its CPU twin in lib/cpu/w8a8_gemm.h, and the whole GEMM through
// both backends. The steps are exact (same fp32 product, same rounding, exact int32 sums), so
// int8 values and int32 sums must be equal, and fp32 results equal up to one rounding (1e-6).
// Inputs are seeded uniform floats; FTX_TEST_SEED repeats a run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "lib/cpu/w8a8_gemm.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "kernels/quantization/int8_gemm_lt.h"
#include "kernels/quantization/quantize_kernels.h"
#endif

namespace ftx {
namespace {

#ifdef FTX_HAVE_CUDA

uint32_t seed() {
  if (const char* s = std::getenv("FTX_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

// A device copy of a host vector, freed with the object.
template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T));
    cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  explicit Dev(size_t count) : n(count) { cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T)); }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

class CudaW8A8 : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    seed_ = seed();
    rng_.seed(seed_);
  }
  std::vector<float> random(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(CudaW8A8, QuantizePerTensorEqualsCpu) {
  // Values up to ±3 at scale 64: saturation on both sides, and exact halves (ties) included.
  auto x = random(10007, -3.0f, 3.0f);
  for (int i = 0; i < 40; ++i) x[i] = (static_cast<float>(i) - 20.0f + 0.5f) / 64.0f;  // x·64 = k + 0.5 exactly
  std::vector<int8_t> want(x.size());
  cpu::quantize_per_tensor(x.data(), static_cast<int64_t>(x.size()), 64.0f, want.data());
  Dev<float> dx(x);
  Dev<int8_t> dq(x.size());
  cuda::invoke_quantize_per_tensor(nullptr, dq.p, dx.p, cuda::ElemKind::kFp32, static_cast<int64_t>(x.size()),
                                   64.0f);
  EXPECT_EQ(dq.get(), want) << "seed " << seed_;
}

TEST_F(CudaW8A8, QuantizePerTokenEqualsCpu) {
  for (auto [M, K] : {std::pair<int64_t, int64_t>{1, 64}, {5, 1000}, {33, 4096}}) {
    auto x = random(static_cast<size_t>(M * K), -2.0f, 2.0f);
    for (int64_t k = 0; k < K; ++k) x[k] = 0.0f;  // an all-zero row: zeros and factor 0
    std::vector<int8_t> want(x.size());
    std::vector<float> want_alpha(static_cast<size_t>(M));
    cpu::quantize_per_token(x.data(), M, K, want.data(), want_alpha.data());
    Dev<float> dx(x), da(static_cast<size_t>(M));
    Dev<int8_t> dq(x.size());
    cuda::invoke_quantize_per_token(nullptr, dq.p, da.p, dx.p, cuda::ElemKind::kFp32, M, K);
    EXPECT_EQ(dq.get(), want) << M << "x" << K << " seed " << seed_;
    EXPECT_EQ(da.get(), want_alpha) << M << "x" << K << " seed " << seed_;
  }
}

TEST_F(CudaW8A8, DequantizeEqualsCpu) {
  const int64_t M = 7, N = 300;
  std::uniform_int_distribution<int32_t> d(-2000000, 2000000);
  std::vector<int32_t> acc(static_cast<size_t>(M * N));
  for (auto& v : acc) v = d(rng_);
  const auto row = random(M, 0.001f, 0.1f), col = random(N, 0.0001f, 0.01f), c0 = random(M * N, -1.0f, 1.0f);
  for (const bool per_token : {false, true}) {
    for (const float beta : {0.0f, 1.0f}) {
      std::vector<float> want = c0;
      cpu::dequantize_int32(acc.data(), M, N, per_token ? row.data() : nullptr, 0.05f, col.data(), want.data(), beta);
      Dev<int32_t> da(acc);
      Dev<float> dr(row), dc(col), out(c0);
      cuda::invoke_dequantize_int32(nullptr, out.p, cuda::ElemKind::kFp32, da.p, M, N, per_token ? dr.p : nullptr, 0.05f,
                                    dc.p, beta);
      const auto got = out.get();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-6 * std::max(1.0f, std::fabs(want[i]))) << i << " seed " << seed_;
    }
  }
}

TEST_F(CudaW8A8, Int8GemmLtEqualsCpu) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  Dev<uint8_t> ws(size_t(32) << 20);
  std::uniform_int_distribution<int> d(-128, 127);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 96, 64}, {8, 3072, 1024}, {37, 256, 4096}}) {
    std::vector<int8_t> a(static_cast<size_t>(M * K)), w(static_cast<size_t>(K * N)), w_t(w.size());
    for (auto& v : a) v = static_cast<int8_t>(d(rng_));
    for (auto& v : w) v = static_cast<int8_t>(d(rng_));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) w_t[n * K + k] = w[k * N + n];
    std::vector<int32_t> want(static_cast<size_t>(M * N));
    cpu::int8_matmul_s32(M, N, K, a.data(), w.data(), want.data());
    Dev<int8_t> da(a), dw(w_t);
    Dev<int32_t> dc(want.size());
    cuda::int8_gemm_lt(lt, nullptr, M, N, K, da.p, dw.p, dc.p, ws.p, ws.n);
    EXPECT_EQ(dc.get(), want) << M << "x" << N << "x" << K;
  }
  cublasLtDestroy(lt);
}

// The backends' gemm() on a W8A8 weight, per-tensor and per-token: equal to one rounding.
TEST_F(CudaW8A8, BackendGemmEqualsCpu) {
  auto cpu = ops::make_backend("cpu", 1), gpu = ops::make_backend("cuda", 1);
  const int64_t M = 9, N = 192, K = 128;
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<int8_t> q(static_cast<size_t>(K * N));
  for (auto& v : q) v = static_cast<int8_t>(d(rng_));
  const auto alpha = random(N, 1e-4f, 1e-2f), a = random(M * K, -4.0f, 4.0f);
  for (const float act_scale : {30.0f, 0.0f}) {
    const ops::Weight wc = cpu->upload_weight_w8a8(q.data(), K, N, alpha.data(), act_scale, 0.03f);
    const ops::Weight wg = gpu->upload_weight_w8a8(q.data(), K, N, alpha.data(), act_scale, 0.03f);
    std::vector<float> want(static_cast<size_t>(M * N)), got(want.size());
    float* ca = cpu->alloc(a.size());
    float* cc = cpu->alloc(want.size());
    cpu->upload(ca, a.data(), a.size());
    cpu->gemm(M, N, K, ca, wc, false, cc, 0.0f);
    cpu->download(want.data(), cc, want.size());
    float* ga = gpu->alloc(a.size());
    float* gc = gpu->alloc(got.size());
    gpu->upload(ga, a.data(), a.size());
    gpu->gemm(M, N, K, ga, wg, false, gc, 0.0f);
    gpu->download(got.data(), gc, got.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 * std::max(1.0f, std::fabs(want[i])))
          << (act_scale > 0 ? "per-tensor" : "per-token") << " element " << i << " seed " << seed_;
    cpu->release(ca);
    cpu->release(cc);
    gpu->release(ga);
    gpu->release(gc);
    cpu->release_weight(wc);
    gpu->release_weight(wg);
  }
}

#else

TEST(CudaW8A8, NeedsCuda) { GTEST_SKIP() << "ftx was built without CUDA"; }

#endif

}  // namespace
}  // namespace ftx
