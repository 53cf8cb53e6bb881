// FP8 on CUDA (label gpu; skips without a device, see gpu_test_util.h) against its CPU twin:
//  * the activation quantisation kernel (kernels/quantization/fp8_kernels.h) against ml_dtypes'
//    codes on the fixture sample of every float32 class (scripts/fixtures/make_e4m3_table.py; NaNs
//    left out: the device's NaN code need not keep the sign) and against float_to_e4m3 on
//    scaled random values, bit for bit;
//  * the FP8 GEMM (cuBLASLt E4M3 × E4M3, fp32 accumulation, scale pointers) against the CPU backend's
//    within 1e-5 of the largest |C| (the same E4M3 operands; only the fp32 sums' order differs);
//  * the FP8 KV cache: prefill and decode attention outputs within 1e-5 and the stored E4M3 bytes
//    equal to the CPU's;
//  * a whole engine (--fp8 --fp8-kv-cache) on the FP8 fixtures against the CPU engine: logits within
//    1e-3 of the row's largest and the same greedy tokens (E4M3 rounding can send a value that lies
//    within the fp32 error of a boundary to the neighbouring code on one device, so not 1e-4);
//  * a GPU before sm_89 refuses --fp8 and --fp8-kv-cache with one line naming it; sm_89 and up take them.
// Not yet run on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "engine_test_util.h"
#include "formats/error.h"
#include "formats/fp8_e4m3.h"
#include "gpu_test_util.h"
#include "lib/ops/backend.h"
#include "lib/quant/fp8.h"

#ifdef FTX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/quantization/fp8_kernels.h"
#endif

namespace ftx {
namespace {

#ifdef FTX_HAVE_CUDA

class CudaFp8 : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    fp8_device_ = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
    rng_.seed(29);
  }
  std::vector<float> random(size_t n, float sd) {
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng_);
    return v;
  }
  // Runs invoke_quantize_fp8 on x · inv.
  std::vector<uint8_t> device_codes(const std::vector<float>& x, float inv) {
    float* dx = nullptr;
    uint8_t* dq = nullptr;
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dq), x.size()), cudaSuccess);
    cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
    cuda::invoke_quantize_fp8(nullptr, dq, dx, cuda::ElemKind::kFp32, x.size(), inv);
    std::vector<uint8_t> q(x.size());
    cudaDeviceSynchronize();
    cudaMemcpy(q.data(), dq, q.size(), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dq);
    return q;
  }
  bool fp8_device_ = false;
  std::mt19937 rng_;
};

TEST_F(CudaFp8, QuantizeKernelEqualsMlDtypesAndTheCpu) {
  const std::string dir = test::env_or("FTX_FIXTURES", "/tmp") + "/fp8-e4m3";
  const std::string cmd = test::env_or("FTX_TEST_PYTHON", "python3") + " " +
                          test::env_or("FTX_SOURCE_DIR", test::source_dir_from_here()) +
                          "/scripts/fixtures/make_e4m3_table.py " + dir;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir + "/sample.bin", std::ios::binary);
  std::vector<float> x;
  std::vector<uint8_t> want;
  char rec[5];
  while (in.read(rec, 5)) {
    float v;
    std::memcpy(&v, rec, 4);
    if (std::isnan(v)) continue;
    x.push_back(v);
    want.push_back(static_cast<uint8_t>(rec[4]));
  }
  ASSERT_GT(x.size(), 1000000u);
  const std::vector<uint8_t> got = device_codes(x, 1.0f);
  size_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) wrong += got[i] != want[i];
  EXPECT_EQ(wrong, 0u) << "of " << x.size() << " non-NaN floats of every class";
  const std::vector<float> a = random(100003, 2.0f);
  const float inv = 1.0f / 0.0123f;
  const std::vector<uint8_t> dev = device_codes(a, inv);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(dev[i], float_to_e4m3(a[i] * inv)) << i;
}

TEST_F(CudaFp8, GemmEqualsCpuTwin) {
  if (!fp8_device_) GTEST_SKIP() << "FP8 GEMMs need sm_89 or later";
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
  cpu->set_fp8(true);
  gpu->set_fp8(true);
  struct Case {
    int64_t M, N, K;
    float beta;
  };
  for (const Case& c : {Case{1, 256, 64, 0}, Case{7, 1024, 256, 1}, Case{64, 768, 1024, 0}, Case{200, 48, 32, 1}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K);
    const std::vector<float> w = random(static_cast<size_t>(c.K * c.N), 0.05f), a = random(c.M * c.K, 1.0f);
    std::vector<float> out0 = random(c.M * c.N, 1.0f);
    float w_max = 0;
    for (float v : w) w_max = std::max(w_max, std::fabs(v));
    const float s_w = quant::fp8_scale_of(w_max), s_x = quant::fp8_scale_of(3.0);
    std::vector<uint8_t> q(w.size());
    quant::quantize_e4m3(w.data(), w.size(), s_w, q.data());
    std::vector<float> got(out0.size()), want(out0.size());
    for (auto* be : {cpu.get(), gpu.get()}) {
      const ops::Weight B = be->upload_weight_fp8(q.data(), c.K, c.N, s_x, s_w);
      float* A = be->alloc(a.size());
      float* C = be->alloc(out0.size());
      be->upload(A, a.data(), a.size());
      be->upload(C, out0.data(), out0.size());
      be->gemm(c.M, c.N, c.K, A, B, false, C, c.beta);
      be->download(be == cpu.get() ? want.data() : got.data(), C, out0.size());
      be->release(A);
      be->release(C);
      be->release_weight(B);
    }
    double scale = 1e-30, worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    }
    EXPECT_LE(worst, 1e-5 * scale);
  }
}

TEST_F(CudaFp8, KvCacheEqualsCpuTwin) {
  if (!fp8_device_) GTEST_SKIP() << "the FP8 KV cache needs sm_89 or later";
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
  cpu->set_fp8_kv_cache(true);
  gpu->set_fp8_kv_cache(true);
  ops::AttentionShape sh;
  sh.q_heads = 4;
  sh.kv_heads = 4;
  sh.head_dim = 64;
  sh.max_seq = 96;
  sh.block_size = sh.max_seq;  // one block per row: block b is cache row b
  sh.scale = 0.125f;
  const int64_t rows = 2, S = 40;
  const size_t n = static_cast<size_t>(rows * sh.block_elems());
  std::vector<uint8_t> cache_cpu[2], cache_gpu[2];
  std::vector<float> out_cpu, out_gpu;
  const std::vector<float> qkv = random(static_cast<size_t>(rows * S * sh.qkv_width()), 1.5f);
  const std::vector<float> step = random(static_cast<size_t>(rows * sh.qkv_width()), 1.5f);
  const std::vector<int32_t> lengths = {40, 23}, crow = {1, 0}, past = {40, 23};
  for (auto* be : {cpu.get(), gpu.get()}) {
    ASSERT_EQ(be->kv_dtype(), DType::kFloat8E4M3);
    ops::KvCache k = be->alloc_kv(n), v = be->alloc_kv(n);
    k.scale = 0.0071f;
    v.scale = 0.0043f;
    float* dq = be->alloc(qkv.size());
    float* ds = be->alloc(step.size());
    float* out = be->alloc(static_cast<size_t>(rows * S * sh.q_heads * sh.head_dim));
    be->upload(dq, qkv.data(), qkv.size());
    be->upload(ds, step.data(), step.size());
    const ops::BlockTables tables{crow.data(), 1};
    be->context_attention(out, dq, rows, S, lengths.data(), tables, k, v, sh);
    be->decode_attention(out, ds, rows, tables, past.data(), k, v, sh);
    std::vector<float> o(static_cast<size_t>(rows * sh.q_heads * sh.head_dim));
    be->download(o.data(), out, o.size());
    (be == cpu.get() ? out_cpu : out_gpu) = o;
    auto* bytes = be == cpu.get() ? cache_cpu : cache_gpu;
    for (int i = 0; i < 2; ++i) {
      const ops::KvCache& c = i == 0 ? k : v;
      bytes[i].resize(n);
      // Whole floats of E4M3 bytes through download (the cache is a float-sized allocation).
      std::vector<float> words((n + 3) / 4);
      be->download(words.data(), static_cast<const float*>(c.data), words.size());
      std::memcpy(bytes[i].data(), words.data(), n);
    }
    be->release(dq);
    be->release(ds);
    be->release(out);
    be->release_kv(k);
    be->release_kv(v);
  }
  // Slots never written hold whatever the allocation held: compare the written ones.
  auto written = [&](int64_t row, int64_t slot) {
    const int64_t r = row == crow[0] ? 0 : 1;
    return slot <= past[static_cast<size_t>(r)];
  };
  for (int i = 0; i < 2; ++i)
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t h = 0; h < sh.kv_heads; ++h)
        for (int64_t s = 0; s < sh.max_seq; ++s) {
          if (!written(row, s)) continue;
          const size_t at = static_cast<size_t>(row * sh.block_elems() + (h * sh.block_size + s) * sh.head_dim);
          ASSERT_EQ(0, std::memcmp(cache_cpu[i].data() + at, cache_gpu[i].data() + at, sh.head_dim))
              << (i ? "V" : "K") << " row " << row << " head " << h << " slot " << s;
        }
  for (size_t i = 0; i < out_cpu.size(); ++i) ASSERT_NEAR(out_gpu[i], out_cpu[i], 1e-5 * std::max(1.0f, std::fabs(out_cpu[i])));
}

TEST_F(CudaFp8, EngineEqualsCpu) {
  if (!fp8_device_) GTEST_SKIP() << "FP8 needs sm_89 or later";
  const std::string dir = test::env_or("FTX_FIXTURES", "/tmp") + "/fp8/gpt2";
  if (!std::ifstream(dir + "/DONE").good() && !std::ifstream(dir + "/../DONE").good())
    GTEST_SKIP() << dir << ": the FP8 fixtures (ctest fp8_fixtures) are not made";
  const auto e = test::load_expected(dir, "fp8_both");
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
  for (auto* be : {cpu.get(), gpu.get()}) {
    be->set_fp8(true);
    be->set_fp8_kv_cache(true);
  }
  dist::SingleRank comm;
  const auto c = test::run_greedy_paths_on(*cpu, dir + "/1-gpu", e, comm);
  const auto g = test::run_greedy_paths_on(*gpu, dir + "/1-gpu", e, comm);
  for (size_t b = 0; b < e.prompts.size(); ++b)
    for (size_t s = 0; s < e.greedy[b].size(); ++s) {
      EXPECT_TRUE(test::logits_close(g.steps[b][s].data(), c.steps[b][s].data(), e.vocab, 1e-3)) << b << " " << s;
      const auto& l = g.steps[b][s];
      EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]) << "prompt " << b << " step " << s;
    }
}

TEST_F(CudaFp8, OlderGpuRefusesFp8) {
  auto gpu = ops::make_backend("cuda", 1);
  for (bool kv : {false, true}) {
    try {
      kv ? gpu->set_fp8_kv_cache(true) : gpu->set_fp8(true);
      EXPECT_TRUE(fp8_device_) << "a GPU before sm_89 took " << (kv ? "--fp8-kv-cache" : "--fp8");
    } catch (const Error& err) {
      EXPECT_FALSE(fp8_device_) << err.what();
      EXPECT_NE(std::string(err.what()).find("compute capability 8.9"), std::string::npos) << err.what();
      EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos);
    }
  }
}

#else
TEST(CudaFp8, NotBuilt) { GTEST_SKIP() << "ftx was built without CUDA"; }
#endif

}  // namespace
}  // namespace ftx
