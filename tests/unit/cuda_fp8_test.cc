// FP8 on CUDA (label gpu; skips without a device, see gpu_test_util.h) against its CPU twin:
//  * the activation quantisation kernel (kernels/quantization/fp8_kernels.h) against ml_dtypes'
//    codes on the fixture sample of every float32 class (scripts/fixtures/make_e4m3_table.py; NaNs
//    left out: the device's NaN code need not keep the sign) and against float_to_e4m3 on
//    scaled random values, bit for bit;
//  * the FP8 GEMM (cuBLASLt E4M3 × E4M3, scale pointers) against the CPU backend's on the same E4M3
//    operands: on operands whose partial sums no accumulator of 11 bits rounds, equal up to the
//    epilogue's fp32 rounding; on random ones within the bound of Hopper's 14-bit accumulator
//    (fp8_accumulator_model.h), per output;
//  * the FP8 KV cache: prefill and decode attention outputs within 1e-5 and the stored E4M3 bytes
//    equal to the CPU's;
//  * a whole engine (--fp8 --fp8-kv-cache) on the FP8 fixtures (made on first use; gpu-run carries
//    them) against the CPU engine: logits within 1e-3 plus twice what an emulated 14-bit accumulator
//    moves the CPU's, and the same greedy tokens up to near ties;
//  * a GPU before sm_89 refuses --fp8 and --fp8-kv-cache with one line naming it; sm_89 and up take them.
// Not yet run on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "engine_test_util.h"
#include "fp8_accumulator_model.h"
#include "fp8_test_util.h"
#include "formats/error.h"
#include "formats/fp8_e4m3.h"
#include "gpu_test_util.h"
#include "lib/ops/backend.h"
#include "lib/quant/fp8.h"

#ifdef FTX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/quantization/fp8_device.h"
#include "kernels/quantization/fp8_kernels.h"
#endif

namespace ftx {
namespace {

// One FP8 GEMM C = A·W + beta·C0 on `be` (E4M3 weight codes q [K, N] and their scales); C back.
std::vector<float> fp8_gemm_on(ops::Backend& be, int64_t M, int64_t N, int64_t K, const std::vector<float>& a,
                               const std::vector<uint8_t>& q, float s_x, float s_w, const std::vector<float>& c0,
                               float beta) {
  be.require_fp8("--fp8");
  const ops::Weight B = be.upload_weight_fp8(q.data(), K, N, s_x, s_w);
  float* A = be.alloc(a.size());
  float* C = be.alloc(c0.size());
  be.upload(A, a.data(), a.size());
  be.upload(C, c0.data(), c0.size());
  be.gemm(M, N, K, A, B, false, C, beta);
  std::vector<float> out(c0.size());
  be.download(out.data(), C, c0.size());
  be.release(A);
  be.release(C);
  be.release_weight(B);
  return out;
}

// A random FP8 GEMM case: A, the E4M3 codes of a random W, their scales, C0.
struct Fp8Case {
  int64_t M, N, K;
  float beta;
  std::vector<float> a, c0;
  std::vector<uint8_t> q;
  float s_x = 1, s_w = 1;
};
Fp8Case random_fp8_case(int64_t M, int64_t N, int64_t K, float beta, std::mt19937& rng) {
  auto random = [&](size_t n, float sd) {
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
  };
  Fp8Case c{M, N, K, beta, random(static_cast<size_t>(M * K), 1.0f), random(static_cast<size_t>(M * N), 1.0f), {}};
  const std::vector<float> w = random(static_cast<size_t>(K * N), 0.05f);
  float w_max = 0;
  for (float v : w) w_max = std::max(w_max, std::fabs(v));
  c.s_w = quant::fp8_scale_of(w_max);
  c.s_x = quant::fp8_scale_of(3.0);
  c.q.resize(w.size());
  quant::quantize_e4m3(w.data(), w.size(), c.s_w, c.q.data());
  return c;
}

// The largest |got - want| over its bound (fp8_accumulator_model.h) among C's outputs; a failure
// names the first output past it.
double worst_of_bound(const Fp8Case& c, const std::vector<float>& got, const std::vector<float>& want) {
  const float inv = 1.0f / c.s_x;
  std::vector<double> qa(c.a.size()), qw(c.q.size());  // |E4M3 values| of A's codes and W's
  for (size_t i = 0; i < qa.size(); ++i) qa[i] = std::fabs(quant::e4m3_to_float(quant::float_to_e4m3(c.a[i] * inv)));
  for (size_t i = 0; i < qw.size(); ++i) qw[i] = std::fabs(quant::e4m3_to_float(c.q[i]));
  double worst = 0;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double abs_products = 0;
      for (int64_t k = 0; k < c.K; ++k) abs_products += qa[m * c.K + k] * qw[static_cast<size_t>(k * c.N + n)];
      const size_t i = static_cast<size_t>(m * c.N + n);
      const double bound = test::fp8_gemm_bound(abs_products, c.K, static_cast<double>(c.s_x) * c.s_w) +
                           2.5e-7 * std::max(1.0f, std::fabs(want[i]));
      const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
      EXPECT_LE(err, bound) << "output (" << m << ", " << n << "): " << got[i] << ", cpu " << want[i];
      worst = std::max(worst, err / bound);
    }
  return worst;
}

const struct {
  int64_t M, N, K;
  float beta;
} kRandomFp8Cases[] = {{1, 256, 64, 0}, {7, 1024, 256, 1}, {64, 768, 1024, 0}, {200, 48, 32, 1}, {2, 1024, 4096, 0}};


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

// Operands whose sums no accumulator of 11 or more bits rounds (fp8_accumulator_model.h): A/s_x in
// {±1}, W/s_w in {±1, ±1.5}, power-of-two scales, K ≤ 512, so every partial sum of any order is a
// multiple of 1/2 below 768. The GEMM then equals its CPU twin up to the fp32 rounding of
// acc·s_x·s_w + beta·C0 (the scales' product exact): any indexing, transposition or scale error
// shows at full size.
TEST_F(CudaFp8, GemmEqualsCpuTwinOnExactlySummableOperands) {
  if (!fp8_device_) GTEST_SKIP() << "FP8 GEMMs need sm_89 or later";
  struct Case {
    int64_t M, N, K;
    float beta;
  };
  std::uniform_int_distribution<int> sign(0, 1), three(0, 3);
  for (const Case& c : {Case{1, 256, 64, 0}, Case{7, 1024, 256, 1}, Case{64, 768, 512, 0}, Case{200, 48, 32, 1},
                        Case{3, 4096, 512, 1}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K);
    const float s_x = 0.0625f, s_w = 0.0078125f;
    std::vector<float> a(static_cast<size_t>(c.M * c.K)), w(static_cast<size_t>(c.K * c.N));
    for (float& x : a) x = s_x * (sign(rng_) ? 1.0f : -1.0f);
    for (float& x : w) x = s_w * (three(rng_) & 1 ? 1.5f : 1.0f) * (three(rng_) & 2 ? 1.0f : -1.0f);
    std::vector<uint8_t> q(w.size());
    quant::quantize_e4m3(w.data(), w.size(), s_w, q.data());
    for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(quant::e4m3_to_float(q[i]) * s_w, w[i]);  // exact codes
    const std::vector<float> c0 = random(static_cast<size_t>(c.M * c.N), 1.0f);
    auto cpu = ops::make_backend("cpu", 1);
    auto gpu = ops::make_backend("cuda", 1);
    const std::vector<float> want = fp8_gemm_on(*cpu, c.M, c.N, c.K, a, q, s_x, s_w, c0, c.beta),
                             got = fp8_gemm_on(*gpu, c.M, c.N, c.K, a, q, s_x, s_w, c0, c.beta);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2.5e-7 * std::max(1.0f, std::fabs(want[i]))) << "output " << i;
  }
}

// Random operands: each output within the bound of Hopper's FP8 accumulator
// (fp8_accumulator_model.h: 14 bits inside blocks of at most 128 products, fp32 between them) of the
// CPU's exact fp32 accumulation of the same E4M3 operands, plus fp32's rounding of the epilogue.
TEST_F(CudaFp8, GemmWithinTheFp8AccumulatorBoundOfCpuTwin) {
  if (!fp8_device_) GTEST_SKIP() << "FP8 GEMMs need sm_89 or later";
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
  for (const auto& s : kRandomFp8Cases) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K);
    const Fp8Case c = random_fp8_case(s.M, s.N, s.K, s.beta, rng_);
    const double worst = worst_of_bound(c, fp8_gemm_on(*gpu, c.M, c.N, c.K, c.a, c.q, c.s_x, c.s_w, c.c0, c.beta),
                                        fp8_gemm_on(*cpu, c.M, c.N, c.K, c.a, c.q, c.s_x, c.s_w, c.c0, c.beta));
    std::printf("M=%lld N=%lld K=%lld: largest error %.3g of its bound\n", static_cast<long long>(c.M),
                static_cast<long long>(c.N), static_cast<long long>(c.K), worst);
  }
}

TEST_F(CudaFp8, KvCacheEqualsCpuTwin) {
  if (!fp8_device_) GTEST_SKIP() << "the FP8 KV cache needs sm_89 or later";
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
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
    ops::KvCache k = be->alloc_kv(n, DType::kFloat8E4M3), v = be->alloc_kv(n, DType::kFloat8E4M3);
    ASSERT_EQ(k.dtype, DType::kFloat8E4M3);
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

// A whole engine (--fp8 --fp8-kv-cache, FP8 fixtures, every layer GEMM FP8) on the GPU against the
// CPU's, which accumulates in fp32. The accumulator's rounding (fp8_accumulator_model.h) moves the
// GEMM outputs by up to ~1e-4 relative, and the next layer's E4M3 quantisation turns some of those
// moves into a whole E4M3 step (6%) of one activation, so the logits move by far more than fp32
// noise. How far, for these models and prompts: the CPU engine with the accumulator emulated (blocks
// of 32 and 128 products, 14 bits, truncated and rounded to nearest), its largest distance from the
// fp32 run over every model, step and logit, Δ (row's largest |logit|). The GPU is held to
// 1e-3 + 2·Δ of the CPU (twice: the hardware's order and rounding are not the emulation's, so its
// flips land elsewhere) and to its greedy tokens except where the CPU's top two are closer than that.
TEST_F(CudaFp8, EngineEqualsCpuWithinTheAccumulatorsReach) {
  if (!fp8_device_) GTEST_SKIP() << "FP8 needs sm_89 or later";
  const std::string dir = test::fp8_fixtures() + "/gpt2";
  const auto e = test::load_expected(dir, "fp8_both");
  ASSERT_FALSE(e.prompts.empty()) << dir << ": no fp8_both paths";
  QuantPolicy fp8;
  fp8.fp8 = fp8.fp8_kv_cache = true;
  dist::SingleRank comm;
  auto cpu = ops::make_backend("cpu", 1);
  const auto c = test::run_greedy_paths_on(*cpu, dir + "/1-gpu", e, comm, {}, fp8);
  auto distance = [&](const test::Observed& o) { return test::largest_logit_gap(o, c); };
  double reach = 0;
  for (int64_t block : {int64_t(32), test::kFp8PromotionInterval})
    for (bool truncate : {true, false}) {
      test::Fp8AccumulatorEmulation emu(block, test::kFp8AccumulatorBits, truncate);
      const double d = distance(test::run_greedy_paths_on(emu, dir + "/1-gpu", e, comm, {}, fp8));
      std::printf("emulated accumulator (blocks of %lld, %s): %.3g of the row from fp32 accumulation\n",
                  static_cast<long long>(block), truncate ? "truncated" : "nearest", d);
      reach = std::max(reach, d);
    }
  const double tol = 1e-3 + 2 * reach;
  auto gpu = ops::make_backend("cuda", 1);
  gpu->require_fp8("--fp8");
  const auto g = test::run_greedy_paths_on(*gpu, dir + "/1-gpu", e, comm, {}, fp8);
  std::printf("GPU: %.3g of the row from the CPU (tolerance %.3g)\n", distance(g), tol);
  for (size_t b = 0; b < e.prompts.size(); ++b)
    for (size_t s = 0; s < e.greedy[b].size(); ++s) {
      EXPECT_TRUE(test::logits_close(g.steps[b][s].data(), c.steps[b][s].data(), e.vocab, tol)) << b << " " << s;
      const auto& l = g.steps[b][s];
      const auto& ref = c.steps[b][s];
      const int64_t got = std::max_element(l.begin(), l.end()) - l.begin();
      const int64_t want = std::max_element(ref.begin(), ref.end()) - ref.begin();
      double row = 1.0;
      for (float x : ref) row = std::max(row, std::fabs(static_cast<double>(x)));
      if (got != want)
        EXPECT_LE(ref[want] - ref[got], tol * row) << "prompt " << b << " step " << s << ": token " << got
                                                   << " where the CPU's " << want << " leads by more than the tolerance";
    }
}

// The check itself is host code: it runs without a device.
TEST(CudaFp8Device, RefusesBeforeSm89NamingTheGpu) {
  EXPECT_NO_THROW(cuda::require_fp8_device("GPU 0", 9, 0, "--fp8"));
  EXPECT_NO_THROW(cuda::require_fp8_device("GPU 0", 8, 9, "--fp8"));
  try {
    cuda::require_fp8_device("GPU 0 (NVIDIA A100-SXM4-80GB)", 8, 0, "--fp8-kv-cache");
    ADD_FAILURE() << "sm 8.0 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "GPU 0 (NVIDIA A100-SXM4-80GB): --fp8-kv-cache needs FP8 tensor cores (compute capability 8.9 or 9.0 "
              "and up: Ada, Hopper); this GPU is 8.0");
  }
}

TEST_F(CudaFp8, OlderGpuRefusesFp8) {
  auto gpu = ops::make_backend("cuda", 1);
  for (bool kv : {false, true}) {
    try {
      gpu->require_fp8(kv ? "--fp8-kv-cache" : "--fp8");
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

// The bound itself, on the CPU (no device): the emulated accumulator (14 bits over blocks of 32 and
// 128 products, truncated or rounded to nearest) stays within it of the CPU's fp32 sums on the
// random cases the GPU test uses (the smaller ones: the emulation is slow).
TEST(Fp8AccumulatorModel, TheBoundHoldsForTheEmulatedAccumulator) {
  std::mt19937 rng(31);
  auto cpu = ops::make_backend("cpu", 1);
  for (int64_t block : {int64_t(32), test::kFp8PromotionInterval})
    for (bool truncate : {true, false}) {
      test::Fp8AccumulatorEmulation emu(block, test::kFp8AccumulatorBits, truncate);
      double worst = 0;
      for (const auto& s : kRandomFp8Cases) {
        if (s.M * s.N * s.K > (int64_t(1) << 24)) continue;
        SCOPED_TRACE(::testing::Message() << "block " << block << (truncate ? " truncated" : " nearest") << " M=" << s.M
                                          << " N=" << s.N << " K=" << s.K);
        const Fp8Case c = random_fp8_case(s.M, s.N, s.K, s.beta, rng);
        worst = std::max(worst, worst_of_bound(c, fp8_gemm_on(emu, c.M, c.N, c.K, c.a, c.q, c.s_x, c.s_w, c.c0, c.beta),
                                               fp8_gemm_on(*cpu, c.M, c.N, c.K, c.a, c.q, c.s_x, c.s_w, c.c0, c.beta)));
      }
      std::printf("blocks of %lld, %s: largest error %.3g of the bound\n", static_cast<long long>(block),
                  truncate ? "truncated" : "nearest", worst);
    }
}

// The accumulator emulation itself, on the CPU (no device): with fp32's 24 bits, rounded to nearest,
// in one block, it is the CPU's FP8 engine (within 1e-3 of the row: the CPU's kernels sum in another
// fp32 order, and a value at an E4M3 boundary may round the other way); with 14 bits it moves the
// logits by what CudaFp8.EngineEqualsCpuWithinTheAccumulatorsReach then admits (printed).
TEST(Fp8AccumulatorModel, WithFp32sBitsItIsTheCpuEngine) {
  const std::string dir = test::fp8_fixtures() + "/gpt2";
  const auto e = test::load_expected(dir, "fp8_both");
  ASSERT_FALSE(e.prompts.empty()) << dir << ": no fp8_both paths";
  dist::SingleRank comm;
  QuantPolicy fp8;
  fp8.fp8 = fp8.fp8_kv_cache = true;
  auto run = [&](ops::Backend& be) { return test::run_greedy_paths_on(be, dir + "/1-gpu", e, comm, {}, fp8); };
  auto cpu = ops::make_backend("cpu", 1);
  const auto want = run(*cpu);
  test::Fp8AccumulatorEmulation fp32_like(int64_t(1) << 40, 24, false), hopper(32, test::kFp8AccumulatorBits, true);
  const auto same = run(fp32_like), moved = run(hopper);
  for (size_t b = 0; b < e.prompts.size(); ++b)
    for (size_t s = 0; s < want.steps[b].size(); ++s)
      EXPECT_TRUE(test::logits_close(same.steps[b][s].data(), want.steps[b][s].data(), e.vocab, 1e-3)) << b << " " << s;
  const double reach = test::largest_logit_gap(moved, want);
  std::printf("14-bit accumulator over blocks of 32, truncated: %.3g of the row from fp32 accumulation\n", reach);
}

}  // namespace
}  // namespace ftx
