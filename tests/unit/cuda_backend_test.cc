// The CUDA backend against the CPU reference backend, op by op and for a whole Engine run (label
// `gpu`: every test skips itself on a machine without a GPU or a build without CUDA, and fails on
// any other CUDA error or under FTX_REQUIRE_GPU=1; gpu_test_util.h).
//
// Inputs are fresh uniform(-1, 1) floats every run (seed printed with each failure; FTX_TEST_SEED
// fixes it). Tolerance for every fp32 comparison, element-wise:
//     |cuda_i - cpu_i| <= 1e-5 · max(1, scale_i)
// with scale_i = |cpu_i| (relative, absolute for values below 1), except for GEMM outputs, where
// scale_i = Σ_k |A_ik|·|B_kj| (the error bound of a dot product does not shrink with cancellation).
// End to end: identical greedy tokens and logits within 1e-4 of the row's largest |logit|
// (test::logits_close), on all engine fixture models (MHA/MQA, learned/rotary both styles/ALiBi,
// pre/post-LN, parallel residual, gated FFN).
//
// Half-precision weights (--dtype fp16/bf16): a GEMM must equal the CPU's fp32 GEMM of the same
// operands rounded to the half type, within 1e-5 of the GEMM scale (same products, fp32 sums), and
// the unrounded fp32 GEMM within 1e-2 (fp16) / 4e-2 (bf16) of it; a half KV cache holds exactly
// what the CPU's holds for half-representable inputs; end to end (half weights and half KV cache),
// logits within those tolerances of the CPU's fp32 run of the same model files (row's largest
// |logit|).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gpu_test_util.h"
#include "graph_steps_test_util.h"
#include "lib/engine/scheduler.h"
#include "formats/error.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <unistd.h>

#include <cstdio>

#include "kernels/cuda_backend/cuda_backend.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/cuda_backend/nccl_communicator.h"
#include "kernels/gemm_tune/gemm_tuner.h"
#include "lib/gemm/gemm_config_file.h"
#include "lib/ops/host_math.h"
#endif

namespace ftx {
namespace {

using test::have_cuda_device;

uint32_t test_seed() {
  if (const char* s = std::getenv("FTX_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

// Both backends plus a seeded generator.
class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    seed_ = test_seed();
    rng_.seed(seed_);
    cpu_ = ops::make_backend("cpu", 1);
    gpu_ = ops::make_backend("cuda", 1);
  }
  void TearDown() override {
    for (auto& [be, p] : owned_) be->release(p);
    owned_.clear();
  }

  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  int32_t random_int(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  void check_gemm(int64_t M, int64_t N, int64_t K, bool trans_b, float beta, int64_t misalign);

  // A buffer of the same contents on both backends.
  struct Dual {
    float* c = nullptr;
    float* g = nullptr;
    size_t n = 0;
  };
  Dual dual(const std::vector<float>& host) {
    Dual d{cpu_->alloc(host.size()), gpu_->alloc(host.size()), host.size()};
    owned_.push_back({cpu_.get(), d.c});
    owned_.push_back({gpu_.get(), d.g});
    cpu_->upload(d.c, host.data(), host.size());
    gpu_->upload(d.g, host.data(), host.size());
    return d;
  }
  Dual dual_random(size_t n) { return dual(random(n)); }
  std::vector<float> get(ops::Backend& be, const float* p, size_t n) {
    std::vector<float> v(n);
    be.download(v.data(), p, n);
    return v;
  }
  std::vector<float> cpu_of(const Dual& d) { return get(*cpu_, d.c, d.n); }
  std::vector<float> gpu_of(const Dual& d) { return get(*gpu_, d.g, d.n); }

  // The file's tolerance (see the top comment); `scale` replaces |want_i| when given.
  ::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want,
                                   const std::vector<double>* scale = nullptr, double rel = 1e-5) {
    if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
    for (size_t i = 0; i < got.size(); ++i) {
      const double s = scale ? (*scale)[i] : std::fabs(static_cast<double>(want[i]));
      const double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
      if (!(d <= rel * std::max(1.0, s)))
        return ::testing::AssertionFailure() << "element " << i << " of " << got.size() << ": cuda " << got[i]
                                             << ", cpu " << want[i] << " (|diff| " << d << ", seed " << seed_ << ")";
    }
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult same(const Dual& d) { return close(gpu_of(d), cpu_of(d)); }

  uint32_t seed_ = 0;
  std::mt19937 rng_;
  std::unique_ptr<ops::Backend> cpu_, gpu_;
  std::vector<std::pair<ops::Backend*, float*>> owned_;
};

TEST_F(CudaVsCpu, NameAndMemoryRoundTrip) {
  EXPECT_EQ(gpu_->name(), "cuda");
  // Many sizes, released out of order, reallocated: contents survive, nothing aliases.
  std::vector<std::pair<float*, std::vector<float>>> live;
  for (size_t n : {size_t(1), size_t(0), size_t(3), size_t(1000), size_t(65), size_t(1) << 20, size_t(7)}) {
    auto host = random(n);
    float* p = gpu_->alloc(n);
    ASSERT_NE(p, nullptr);
    gpu_->upload(p, host.data(), n);
    live.emplace_back(p, host);
  }
  gpu_->release(live[1].first);
  gpu_->release(live[4].first);
  live.erase(live.begin() + 4);
  live.erase(live.begin() + 1);
  for (size_t n : {size_t(64), size_t(2) << 20}) {
    auto host = random(n);
    float* p = gpu_->alloc(n);
    gpu_->upload(p, host.data(), n);
    live.emplace_back(p, host);
  }
  for (auto& [p, host] : live) {
    EXPECT_EQ(get(*gpu_, p, host.size()), host);
    gpu_->release(p);
  }
  gpu_->release(nullptr);
}

TEST_F(CudaVsCpu, CopyAndFill) {
  for (size_t n : {size_t(1), size_t(37), size_t(100000)}) {
    auto a = dual_random(n), b = dual_random(n);
    cpu_->copy(b.c, a.c, n);
    gpu_->copy(b.g, a.g, n);
    EXPECT_EQ(gpu_of(b), cpu_of(b));
    const float v = random(1)[0];
    cpu_->fill(a.c, v, n);
    gpu_->fill(a.g, v, n);
    EXPECT_EQ(gpu_of(a), cpu_of(a));
  }
  // Overlapping ranges copy as memmove, both directions.
  auto a = dual_random(1000);
  cpu_->copy(a.c + 10, a.c, 900);
  gpu_->copy(a.g + 10, a.g, 900);
  cpu_->copy(a.c, a.c + 7, 900);
  gpu_->copy(a.g, a.g + 7, 900);
  EXPECT_EQ(gpu_of(a), cpu_of(a));
}

// One GEMM on both backends, compared with the GEMM tolerance of the file comment.
void CudaVsCpu::check_gemm(int64_t M, int64_t N, int64_t K, bool trans_b, float beta, int64_t misalign) {
  SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) + " trans_b " +
               std::to_string(trans_b) + " beta " + std::to_string(beta) + " misalign " + std::to_string(misalign));
  const auto ha = random(M * K + misalign), hb = random(K * N + misalign);
  auto a = dual(ha), b = dual(hb), c = dual_random(M * N + misalign);
  if (beta == 0.0f) {  // beta 0 must ignore C, even NaN
    const std::vector<float> nan(c.n, std::nanf(""));
    cpu_->upload(c.c, nan.data(), c.n);
    gpu_->upload(c.g, nan.data(), c.n);
  }
  const auto c0 = cpu_of(c);
  cpu_->gemm(M, N, K, a.c + misalign, b.c + misalign, trans_b, c.c + misalign, beta);
  gpu_->gemm(M, N, K, a.g + misalign, b.g + misalign, trans_b, c.g + misalign, beta);
  std::vector<double> scale(c.n, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = beta != 0.0f ? std::fabs(beta * c0[misalign + m * N + n]) : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const float bv = trans_b ? hb[misalign + n * K + k] : hb[misalign + k * N + n];
        acc += std::fabs(static_cast<double>(ha[misalign + m * K + k]) * bv);
      }
      scale[misalign + m * N + n] = acc;
    }
  auto got = gpu_of(c), want = cpu_of(c);
  if (misalign) {  // the element before the matrix is untouched garbage (NaN with beta 0)
    got.erase(got.begin());
    want.erase(want.begin());
    scale.erase(scale.begin());
  }
  EXPECT_TRUE(close(got, want, &scale));
}

TEST_F(CudaVsCpu, Gemm) {
  struct Shape {
    int64_t M, N, K;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 257, 129}, Shape{3, 5, 7}, Shape{17, 33, 65}, Shape{64, 96, 128},
                        Shape{5, 1001, 64}, Shape{2, 64, 1024}})
    for (bool trans_b : {false, true})
      for (float beta : {0.0f, 0.5f})
        for (int64_t misalign : {0, 1})  // offset pointers: cuBLASLt must not assume 256-byte alignment
          check_gemm(s.M, s.N, s.K, trans_b, beta, misalign);
}

#ifdef FTX_HAVE_CUDA
// gemm_config.in drives the GEMMs it lists (ftx generate --gemm-config): classic cuBLAS rows (all
// that FT's gpt_gemm writes for fp32) run through cublasGemmEx with their algorithm; a row that
// cuBLASLt rejects falls back to the heuristic. Results stay within the GEMM tolerance either way,
// and the map reports which GEMMs it served.
TEST_F(CudaVsCpu, GemmFromTunedFile) {
  gemm::GemmConfigFile file;
  file.header.has_ftx_metadata = true;
  file.header.device = cuda::device_identity(cuda::current_cuda_device());
  file.header.dtype = "fp32";
  auto row = [](int m, int n, int k, int algo, bool lt) {
    gemm::GemmAlgoRow r;
    r.batch_beam = 1;
    r.seq_len = m;
    r.head_num = 1;
    r.size_per_head = n;
    r.dtype = 0;  // FT's FLOAT_DATATYPE
    r.batch_count = 1;
    r.m = m;
    r.n = n;
    r.k = k;
    r.algo_id = algo;
    if (lt) {  // an algorithm id no cuBLASLt has: must be refused, not run
      r.custom_option = r.tile = r.splitk = r.swizzle = r.reduction_scheme = r.workspace_size = r.stages = 0;
    }
    r.exec_time_ms = 0.01f;
    return r;
  };
  file.rows = {row(3, 48, 32, -1, false), row(17, 33, 65, 0, false), row(8, 64, 64, 100000, true)};
  char dir_tmpl[] = "/tmp/ftx-gemmcfg-XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  const std::string path = std::string(dir_tmpl) + "/gemm_config.in";
  gemm::write_gemm_config(path, file);
  gpu_->use_gemm_config(path, "");
  auto* impl = dynamic_cast<cuda::CudaBackend*>(gpu_.get());
  ASSERT_NE(impl, nullptr);
  ASSERT_TRUE(impl->gemm_algo_map().active()) << impl->gemm_algo_map().rejection();
  for (bool trans_b : {false, true}) {
    check_gemm(3, 48, 32, trans_b, 0.0f, 0);
    check_gemm(17, 33, 65, trans_b, 0.5f, 1);
    check_gemm(8, 64, 64, trans_b, 0.0f, 0);
    check_gemm(5, 7, 9, trans_b, 0.0f, 0);  // not in the file: the heuristic
  }
  EXPECT_EQ(impl->gemm_algo_map().hits(), 3u);  // rows looked up (the refused one is also warned about)
  std::remove(path.c_str());
  rmdir(dir_tmpl);
}
#endif

// Uniform(-1, 1) values from a fixed seed (for tests outside the CudaVsCpu fixture).
std::vector<float> random_table(size_t n) {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// The tolerance of the issue for a half dtype (relative to the GEMM scale or the row's largest logit).
double half_tolerance(DType t) { return t == DType::kFloat16 ? 1e-2 : 4e-2; }

// x rounded to dtype t and widened back (what a half GEMM multiplies).
std::vector<float> rounded(const std::vector<float>& x, DType t) {
  std::vector<uint16_t> h(x.size());
  std::vector<float> back(x.size());
  ops::convert_weight(x.data(), DType::kFloat32, h.data(), t, x.size());
  ops::convert_weight(h.data(), t, back.data(), DType::kFloat32, x.size());
  return back;
}

// Half weights: B held in fp16/bf16 (uploaded from fp32, converted by the backend, or from half
// bytes, copied as they are); A rounded by the backend's cast kernel; fp32 accumulation.
TEST_F(CudaVsCpu, HalfWeightGemm) {
  struct Shape {
    int64_t M, N, K;
  };
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    auto half = ops::make_backend("cuda", 1, t);
    EXPECT_EQ(half->weight_dtype(), t);
    for (const Shape s : {Shape{1, 1, 1}, Shape{1, 3072, 1024}, Shape{3, 5, 7}, Shape{8, 96, 128},
                          Shape{37, 1000, 64}, Shape{128, 256, 512}})
      for (bool trans_b : {false, true})
        for (bool from_half : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " M " + std::to_string(s.M) + " N " + std::to_string(s.N) +
                       " K " + std::to_string(s.K) + " trans_b " + std::to_string(trans_b) + " from_half " +
                       std::to_string(from_half));
          const auto ha = random(s.M * s.K), hb = random(s.K * s.N);
          ops::Weight w;
          if (from_half) {
            std::vector<uint16_t> bits(hb.size());
            ops::convert_weight(hb.data(), DType::kFloat32, bits.data(), t, hb.size());
            w = half->upload_weight(bits.data(), t, hb.size());
          } else {
            w = half->upload_weight(hb.data(), DType::kFloat32, hb.size());
          }
          ASSERT_EQ(w.dtype, t);
          float* a = half->alloc(ha.size());
          float* c = half->alloc(static_cast<size_t>(s.M * s.N));
          half->upload(a, ha.data(), ha.size());
          half->gemm(s.M, s.N, s.K, a, w, trans_b, c, 0.0f);
          auto got = get(*half, c, static_cast<size_t>(s.M * s.N));
          half->release(a);
          half->release(c);
          half->release_weight(w);

          // References on the CPU: the rounded operands (tight) and the exact ones (the dtype's tolerance).
          auto ra = dual(rounded(ha, t)), rb = dual(rounded(hb, t)), xa = dual(ha), xb = dual(hb);
          auto cr = dual_random(s.M * s.N), cx = dual_random(s.M * s.N);
          cpu_->gemm(s.M, s.N, s.K, ra.c, rb.c, trans_b, cr.c, 0.0f);
          cpu_->gemm(s.M, s.N, s.K, xa.c, xb.c, trans_b, cx.c, 0.0f);
          std::vector<double> scale(cr.n, 0.0);
          for (int64_t m = 0; m < s.M; ++m)
            for (int64_t n = 0; n < s.N; ++n)
              for (int64_t k = 0; k < s.K; ++k)
                scale[m * s.N + n] +=
                    std::fabs(static_cast<double>(ha[m * s.K + k]) * (trans_b ? hb[n * s.K + k] : hb[k * s.N + n]));
          EXPECT_TRUE(close(got, cpu_of(cr), &scale, 1e-5)) << "against the rounded operands";
          EXPECT_TRUE(close(got, cpu_of(cx), &scale, half_tolerance(t))) << "against fp32";
        }
  }
}

// Weight-only INT8 (FT int8_mode 1): the same host matrix quantised by both backends gives the same
// int8 values and scales (one host routine), and the CUDA GEMM (widen in scratch, A rounded to the
// model's dtype, then cuBLASLt) equals the CPU's int8 kernels within the GEMM tolerance, for fp32
// and half models, few rows (the CPU's streaming kernel) and many (its widened panels; bf16: its
// pair tiles).
TEST_F(CudaVsCpu, Int8WeightOnlyGemm) {
  struct Shape {
    int64_t M, N, K;
  };
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    auto gpu = ops::make_backend("cuda", 1, t);
    auto cpu_t = ops::make_backend("cpu", 1, t);  // host memory: its weights go to cpu_'s gemm as they are
    for (const Shape s : {Shape{1, 1, 1}, Shape{1, 3072, 1024}, Shape{3, 5, 7}, Shape{8, 96, 128},
                          Shape{37, 1000, 64}, Shape{128, 256, 512}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " +
                   std::to_string(s.K));
      const auto ha = random(s.M * s.K), hb = random(s.K * s.N);
      ops::Weight wc = cpu_t->upload_weight_int8(hb.data(), DType::kFloat32, s.K, s.N);
      ops::Weight wg = gpu->upload_weight_int8(hb.data(), DType::kFloat32, s.K, s.N);
      ASSERT_EQ(wg.dtype, DType::kInt8);
      ASSERT_EQ(wg.input_dtype, t);
      float* a = gpu->alloc(ha.size());
      float* c = gpu->alloc(static_cast<size_t>(s.M * s.N));
      gpu->upload(a, ha.data(), ha.size());
      gpu->gemm(s.M, s.N, s.K, a, wg, false, c, 0.0f);
      auto got = get(*gpu, c, static_cast<size_t>(s.M * s.N));
      gpu->release(a);
      gpu->release(c);
      gpu->release_weight(wg);
      auto xa = dual(ha), cc = dual_random(s.M * s.N);
      cpu_->gemm(s.M, s.N, s.K, xa.c, wc, false, cc.c, 0.0f);
      cpu_t->release_weight(wc);
      std::vector<double> scale(cc.n, 0.0);
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t n = 0; n < s.N; ++n)
          for (int64_t k = 0; k < s.K; ++k)
            scale[m * s.N + n] += std::fabs(static_cast<double>(ha[m * s.K + k]) * hb[k * s.N + n]);
      // Both round A to the model's dtype and multiply it by q · scale with exact products and
      // fp32 sums (the CPU twin's arithmetic): the fp32 tolerance for all.
      EXPECT_TRUE(close(got, cpu_of(cc), &scale, 1e-5));
    }
  }
}

// A half embedding table is widened exactly: equal to the CPU's lookup in the rounded table.
TEST_F(CudaVsCpu, HalfWeightEmbedding) {
  const int64_t V = 50, H = 96, rows = 9;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    auto half = ops::make_backend("cuda", 1, t);
    const auto table = random(V * H);
    const ops::Weight w = half->upload_weight(table.data(), DType::kFloat32, table.size());
    std::vector<int32_t> ids(rows), pos(rows, 0);
    for (int64_t r = 0; r < rows; ++r) ids[r] = random_int(0, V - 1);
    float* out = half->alloc(rows * H);
    half->embedding(out, w, nullptr, ops::PositionTable::kNone, 0, ids.data(), pos.data(), rows, H, 2.0f);
    auto got = get(*half, out, rows * H);
    half->release(out);
    half->release_weight(w);
    auto rt = dual(rounded(table, t)), ref = dual_random(rows * H);
    cpu_->embedding(ref.c, rt.c, nullptr, ops::PositionTable::kNone, 0, ids.data(), pos.data(), rows, H, 2.0f);
    EXPECT_EQ(got, cpu_of(ref)) << dtype_name(t);
  }
}

TEST_F(CudaVsCpu, LayerNorm) {
  for (int64_t rows : {1, 3, 7})
    for (int64_t H : {1, 5, 64, 257, 1024, 9001})  // 9001 floats > the kernel's shared-memory row cache
      for (bool with_beta : {true, false})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE("rows " + std::to_string(rows) + " H " + std::to_string(H) + " beta " +
                       std::to_string(with_beta) + " in_place " + std::to_string(in_place));
          auto x = dual(random(rows * H, -3.0f, 5.0f)), gamma = dual_random(H), beta = dual_random(H);
          auto out = dual_random(rows * H);
          const Dual& dst = in_place ? x : out;
          cpu_->layer_norm(dst.c, x.c, gamma.c, with_beta ? beta.c : nullptr, rows, H, 1e-5f);
          gpu_->layer_norm(dst.g, x.g, gamma.g, with_beta ? beta.g : nullptr, rows, H, 1e-5f);
          EXPECT_TRUE(same(dst));
          EXPECT_TRUE(same(x));
        }
}

TEST_F(CudaVsCpu, AddResidualLayerNorm) {
  for (int64_t rows : {1, 5})
    for (int64_t H : {3, 128, 1000, 9000})
      for (int variant = 0; variant < 6; ++variant) {
        // 0: y+bias+LN  1: y+LN  2: bias+LN  3: y+bias, no LN  4: y only  5: LN written over x (post-LN)
        SCOPED_TRACE("rows " + std::to_string(rows) + " H " + std::to_string(H) + " variant " +
                     std::to_string(variant));
        auto x = dual_random(rows * H), y = dual_random(rows * H), bias = dual_random(H);
        auto gamma = dual_random(H), beta = dual_random(H), out = dual_random(rows * H);
        const bool use_y = variant != 2, use_bias = variant == 0 || variant == 2 || variant == 3 || variant == 5;
        const bool ln = variant <= 2 || variant == 5;
        const Dual& dst = variant == 5 ? x : out;
        cpu_->add_residual_layer_norm(x.c, use_y ? y.c : nullptr, use_bias ? bias.c : nullptr, ln ? gamma.c : nullptr,
                                      ln ? beta.c : nullptr, ln ? dst.c : nullptr, rows, H, 1e-6f);
        gpu_->add_residual_layer_norm(x.g, use_y ? y.g : nullptr, use_bias ? bias.g : nullptr, ln ? gamma.g : nullptr,
                                      ln ? beta.g : nullptr, ln ? dst.g : nullptr, rows, H, 1e-6f);
        EXPECT_TRUE(same(x));
        EXPECT_TRUE(same(out));
      }
}

TEST_F(CudaVsCpu, RmsNorm) {
  for (int64_t rows : {1, 3, 7})
    for (int64_t H : {1, 5, 64, 257, 9001})
      for (bool in_place : {false, true}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " H " + std::to_string(H) + " in_place " +
                     std::to_string(in_place));
        auto x = dual(random(rows * H, -3.0f, 5.0f)), gamma = dual_random(H), out = dual_random(rows * H);
        const Dual& dst = in_place ? x : out;
        cpu_->rms_norm(dst.c, x.c, gamma.c, rows, H, 1e-5f);
        gpu_->rms_norm(dst.g, x.g, gamma.g, rows, H, 1e-5f);
        EXPECT_TRUE(same(dst));
        EXPECT_TRUE(same(x));
      }
}

TEST_F(CudaVsCpu, AddResidualRmsNorm) {
  for (int64_t rows : {1, 5})
    for (int64_t H : {3, 1000, 9000})
      for (int variant = 0; variant < 3; ++variant) {  // 0: y+bias+norm  1: y+norm  2: y only
        SCOPED_TRACE("rows " + std::to_string(rows) + " H " + std::to_string(H) + " variant " + std::to_string(variant));
        auto x = dual_random(rows * H), y = dual_random(rows * H), bias = dual_random(H);
        auto gamma = dual_random(H), out = dual_random(rows * H);
        const bool norm = variant < 2;
        cpu_->add_residual_rms_norm(x.c, y.c, variant == 0 ? bias.c : nullptr, norm ? gamma.c : nullptr,
                                    norm ? out.c : nullptr, rows, H, 1e-6f);
        gpu_->add_residual_rms_norm(x.g, y.g, variant == 0 ? bias.g : nullptr, norm ? gamma.g : nullptr,
                                    norm ? out.g : nullptr, rows, H, 1e-6f);
        EXPECT_TRUE(same(x));
        EXPECT_TRUE(same(out));
      }
}

TEST_F(CudaVsCpu, AddBias) {
  for (int64_t rows : {1, 4, 9})
    for (int64_t N : {1, 33, 1000}) {
      auto x = dual_random(rows * N), bias = dual_random(N);
      cpu_->add_bias(x.c, bias.c, rows, N);
      gpu_->add_bias(x.g, bias.g, rows, N);
      cpu_->add_bias(x.c, nullptr, rows, N);  // null bias: no-op
      gpu_->add_bias(x.g, nullptr, rows, N);
      EXPECT_TRUE(same(x)) << "rows " << rows << " N " << N;
    }
}

TEST_F(CudaVsCpu, BiasActivation) {
  const Activation acts[] = {Activation::kGelu,   Activation::kGeluTanh, Activation::kRelu,       Activation::kSilu,
                             Activation::kSwiGlu, Activation::kGeGlu,    Activation::kSquaredRelu};
  for (Activation act : acts)
    for (int64_t rows : {1, 3})
      for (int64_t N : {7, 1024})
        for (int flags = 0; flags < 4; ++flags) {
          const bool with_bias = flags & 1, gated = (act == Activation::kSwiGlu || act == Activation::kGeGlu),
                     with_gate_bias = flags & 2;
          SCOPED_TRACE("act " + std::to_string(static_cast<int>(act)) + " rows " + std::to_string(rows) + " N " +
                       std::to_string(N) + " flags " + std::to_string(flags));
          auto x = dual(random(rows * N, -4.0f, 4.0f)), bias = dual_random(N), gate = dual_random(rows * N);
          auto gate_bias = dual_random(N);
          cpu_->bias_activation(x.c, with_bias ? bias.c : nullptr, gated ? gate.c : nullptr,
                                gated && with_gate_bias ? gate_bias.c : nullptr, rows, N, act);
          gpu_->bias_activation(x.g, with_bias ? bias.g : nullptr, gated ? gate.g : nullptr,
                                gated && with_gate_bias ? gate_bias.g : nullptr, rows, N, act);
          EXPECT_TRUE(same(x));
        }
}

TEST_F(CudaVsCpu, Embedding) {
  const int64_t V = 50, P = 3000;
  for (auto table : {ops::PositionTable::kNone, ops::PositionTable::kLearned, ops::PositionTable::kSinusoidal})
    for (int64_t H : {1, 2, 33, 64, 1000})
      for (int64_t offset : {0, 2}) {
        SCOPED_TRACE("table " + std::to_string(static_cast<int>(table)) + " H " + std::to_string(H) + " offset " +
                     std::to_string(offset));
        const int64_t rows = 13;
        std::vector<int32_t> ids(rows), pos(rows);
        for (int64_t r = 0; r < rows; ++r) {
          ids[r] = random_int(0, V - 1);
          pos[r] = random_int(0, static_cast<int32_t>(P - 1 - offset));
        }
        pos[0] = 0;
        auto wte = dual_random(V * H), wpe = dual_random(P * H), out = dual_random(rows * H);
        const float scale = offset ? std::sqrt(static_cast<float>(H)) : 1.0f;
        const bool learned = table == ops::PositionTable::kLearned;
        cpu_->embedding(out.c, wte.c, learned ? wpe.c : nullptr, table, offset, ids.data(), pos.data(), rows, H, scale);
        gpu_->embedding(out.g, wte.g, learned ? wpe.g : nullptr, table, offset, ids.data(), pos.data(), rows, H, scale);
        EXPECT_TRUE(same(out));
      }
}

TEST_F(CudaVsCpu, Rotary) {
  struct Case {
    int64_t heads, head_dim, rot_dim, extra;  // extra: trailing columns (V heads) left alone
    RotaryStyle style;
    double base;
  };
  const Case cases[] = {{2, 16, 16, 32, RotaryStyle::kInterleaved, 10000.0},
                        {2, 16, 16, 32, RotaryStyle::kHalfSplit, 10000.0},
                        {5, 64, 16, 64, RotaryStyle::kHalfSplit, 10000.0},  // partial (NeoX 25%)
                        {3, 10, 6, 0, RotaryStyle::kInterleaved, 1e6},
                        {3, 10, 6, 7, RotaryStyle::kHalfSplit, 1e6},
                        {8, 128, 64, 256, RotaryStyle::kInterleaved, 10000.0}};
  for (const Case& c : cases)
    for (int64_t rows : {1, 6}) {
      SCOPED_TRACE("heads " + std::to_string(c.heads) + " d " + std::to_string(c.head_dim) + " rot " +
                   std::to_string(c.rot_dim) + " rows " + std::to_string(rows));
      const int64_t stride = c.heads * c.head_dim + c.extra;
      std::vector<int32_t> pos(rows);
      for (auto& p : pos) p = random_int(0, 4000);
      auto qkv = dual_random(rows * stride);
      cpu_->rotary(qkv.c, rows, stride, pos.data(), c.heads, c.head_dim, c.rot_dim, c.style, c.base);
      gpu_->rotary(qkv.g, rows, stride, pos.data(), c.heads, c.head_dim, c.rot_dim, c.style, c.base);
      EXPECT_TRUE(same(qkv));
    }
}

struct AttnCase {
  int64_t q_heads, kv_heads, head_dim;
  bool alibi;
};
const AttnCase kAttnCases[] = {
    {4, 4, 16, false},  {4, 1, 16, false},  // MHA, MQA
    {6, 2, 25, false},                      // grouped, odd head_dim
    {6, 6, 16, true},   {6, 1, 32, true},   // ALiBi (6: not a power of two), ALiBi + MQA
    {2, 2, 1, false},   {3, 3, 64, false}, {2, 2, 128, false},
    {2, 1, 256, true},  // head_dim 256: the kernel's opt-in shared memory
};

std::string attn_name(const AttnCase& c) {
  return "q_heads " + std::to_string(c.q_heads) + " kv_heads " + std::to_string(c.kv_heads) + " head_dim " +
         std::to_string(c.head_dim) + (c.alibi ? " alibi" : "");
}

ops::AttentionShape attn_shape(const AttnCase& c, int64_t max_seq, std::vector<float>& slopes) {
  ops::AttentionShape sh;
  sh.q_heads = c.q_heads;
  sh.kv_heads = c.kv_heads;
  sh.head_dim = c.head_dim;
  sh.max_seq = max_seq;
  sh.block_size = max_seq;  // one block per row (row_tables), unless a test pages it
  sh.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  if (c.alibi) {
    slopes = ops::alibi_slopes(c.q_heads);
    sh.alibi_slopes = slopes.data();
  }
  return sh;
}

// The block tables of a cache of whole rows (block_size = max_seq): row i's one block is rows[i].
ops::BlockTables row_tables(const std::vector<int32_t>& rows) { return {rows.data(), 1}; }

// Prefill of a right-padded batch into permuted cache rows (one row unused); outputs (padded
// positions zero) and both whole caches (untouched slots keep their garbage) must match.
TEST_F(CudaVsCpu, ContextAttention) {
  struct Batch {
    int64_t S;
    std::vector<int32_t> lengths, rows;
  };
  const Batch batches[] = {{5, {5, 1, 3}, {2, 0, 3}}, {37, {37, 20, 1}, {1, 3, 0}}, {1, {1}, {2}},
                           {70, {70, 33}, {3, 1}}};
  for (const AttnCase& c : kAttnCases)
    for (const Batch& bt : batches) {
      SCOPED_TRACE(attn_name(c) + " S " + std::to_string(bt.S));
      const int64_t B = static_cast<int64_t>(bt.lengths.size()), cache_rows = 4, max_seq = 80;
      std::vector<float> slopes;
      const auto sh = attn_shape(c, max_seq, slopes);
      auto qkv = dual(random(B * bt.S * sh.qkv_width(), -2.0f, 2.0f));
      auto kc = dual_random(cache_rows * sh.block_elems()), vc = dual_random(cache_rows * sh.block_elems());
      auto out = dual_random(B * bt.S * c.q_heads * c.head_dim);
      cpu_->context_attention(out.c, qkv.c, B, bt.S, bt.lengths.data(), row_tables(bt.rows), kc.c, vc.c, sh);
      gpu_->context_attention(out.g, qkv.g, B, bt.S, bt.lengths.data(), row_tables(bt.rows), kc.g, vc.g, sh);
      EXPECT_TRUE(same(out));
      EXPECT_TRUE(same(kc));
      EXPECT_TRUE(same(vc));
    }
}

// One decode step over random histories of different lengths (slot 0, several key tiles, the
// last slot of the cache), rows in any order.
// Decode splits the keys over up to 8 warps (one tile of 32 each per pass): a 150-slot cache takes
// 5 warps and one pass, a 1000-slot cache 8 warps and up to 4 passes each, some warps with no key.
TEST_F(CudaVsCpu, DecodeAttention) {
  for (const AttnCase& c : kAttnCases)
    for (const int64_t max_seq : {int64_t(150), int64_t(1000)}) {
      SCOPED_TRACE(attn_name(c) + " max_seq " + std::to_string(max_seq));
      const int64_t cache_rows = 6;
      std::vector<float> slopes;
      const auto sh = attn_shape(c, max_seq, slopes);
      const std::vector<int32_t> rows = {3, 0, 5, 1, 4, 2};
      const int32_t last = static_cast<int32_t>(max_seq - 1);
      const std::vector<int32_t> past = {0, 31, 32, last, random_int(1, last - 1), std::min<int32_t>(last, 257)};
      const int64_t n = static_cast<int64_t>(rows.size());
      auto qkv = dual(random(n * sh.qkv_width(), -2.0f, 2.0f));
      auto kc = dual_random(cache_rows * sh.block_elems()), vc = dual_random(cache_rows * sh.block_elems());
      auto out = dual_random(n * c.q_heads * c.head_dim);
      cpu_->decode_attention(out.c, qkv.c, n, row_tables(rows), past.data(), kc.c, vc.c, sh);
      gpu_->decode_attention(out.g, qkv.g, n, row_tables(rows), past.data(), kc.g, vc.g, sh);
      EXPECT_TRUE(same(out));
      EXPECT_TRUE(same(kc));
      EXPECT_TRUE(same(vc));
    }
}

// One row (batch-1 decoding) over a long cache: few (row, head) pairs, so the GPU splits each
// pair's keys over many blocks (flash-decoding, attention_kernels.cu's decode_split) and merges
// them; histories ending on and around split boundaries, at slot 0 and at the last slot, and over
// a circular cache.
TEST_F(CudaVsCpu, DecodeAttentionSplitAcrossBlocks) {
  for (const AttnCase& c : {AttnCase{2, 2, 64, false}, AttnCase{8, 1, 128, true}, AttnCase{4, 2, 25, false}})
    for (const int64_t max_seq : {int64_t(4000), int64_t(1024)})
      for (const int32_t past : {0, 287, 288, 289, 1023, static_cast<int32_t>(max_seq - 1)}) {
        if (past >= max_seq) continue;
        SCOPED_TRACE(attn_name(c) + " max_seq " + std::to_string(max_seq) + " past " + std::to_string(past));
        std::vector<float> slopes;
        const auto sh = attn_shape(c, max_seq, slopes);
        const std::vector<int32_t> rows = {1}, pasts = {past};
        auto qkv = dual(random(sh.qkv_width(), -2.0f, 2.0f));
        auto kc = dual_random(2 * sh.block_elems()), vc = dual_random(2 * sh.block_elems());
        auto out = dual_random(c.q_heads * c.head_dim);
        cpu_->decode_attention(out.c, qkv.c, 1, row_tables(rows), pasts.data(), kc.c, vc.c, sh);
        gpu_->decode_attention(out.g, qkv.g, 1, row_tables(rows), pasts.data(), kc.g, vc.g, sh);
        EXPECT_TRUE(same(out));
        EXPECT_TRUE(same(kc));
      }
  // A circular cache of 2048 slots whose position wrapped: every slot holds a key.
  const AttnCase c{4, 4, 32, true};
  std::vector<float> slopes;
  auto sh = attn_shape(c, 2048, slopes);
  sh.memory_len = 2048;
  const std::vector<int32_t> rows = {0}, pasts = {5000};
  auto qkv = dual(random(sh.qkv_width(), -2.0f, 2.0f));
  auto kc = dual_random(sh.block_elems()), vc = dual_random(sh.block_elems());
  auto out = dual_random(c.q_heads * c.head_dim);
  cpu_->decode_attention(out.c, qkv.c, 1, row_tables(rows), pasts.data(), kc.c, vc.c, sh);
  gpu_->decode_attention(out.g, qkv.g, 1, row_tables(rows), pasts.data(), kc.g, vc.g, sh);
  EXPECT_TRUE(same(out)) << "circular";
}

#ifdef FTX_HAVE_CUDA
// cudaMemcpy of raw half-cache bits, ordered with the backend: its work runs on a non-blocking
// stream, which does not wait for the legacy stream cudaMemcpy uses (nor the reverse). So the
// backend's stream is drained first (its writes are complete before a read, its reads before an
// overwrite), and the copy is complete before the backend's next op (a pageable host-to-device
// cudaMemcpy may return before its DMA ends).
::testing::AssertionResult raw_copy(ops::Backend& backend, void* dst, const void* src, size_t bytes,
                                    cudaMemcpyKind kind) {
  auto* cuda_backend = dynamic_cast<cuda::CudaBackend*>(&backend);
  if (!cuda_backend) return ::testing::AssertionFailure() << "not the CUDA backend";
  cuda_backend->synchronize();
  for (const cudaError_t e : {cudaMemcpy(dst, src, bytes, kind), cudaDeviceSynchronize()})
    if (e != cudaSuccess) return ::testing::AssertionFailure() << "cudaMemcpy: " << cudaGetErrorString(e);
  return ::testing::AssertionSuccess();
}

// A half KV cache (the default with half weights): K and V are rounded when stored, widened when
// read. With inputs already representable in the half type, storing is exact, so the GPU must
// equal the CPU's fp32 cache bit for bit and its attention outputs within the fp32 tolerance
// (prefill, then decode over up to 1000 slots, then a beam-style row gather).
TEST_F(CudaVsCpu, HalfKvCache) {
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (const AttnCase& c : {kAttnCases[0], kAttnCases[1], kAttnCases[2], kAttnCases[4], kAttnCases[8]}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + attn_name(c));
      auto half = ops::make_backend("cuda", 1, t);
      ASSERT_EQ(half->kv_dtype(), t);
      const int64_t rows = 3, max_seq = 1000, S = 40;
      std::vector<float> slopes;
      const auto sh = attn_shape(c, max_seq, slopes);
      const size_t cache_n = static_cast<size_t>(rows * sh.block_elems());
      // Same starting cache on both: rounded garbage (untouched slots must survive as they are).
      const auto start = rounded(random(cache_n), t);
      std::vector<uint16_t> bits(cache_n);
      ops::convert_weight(start.data(), DType::kFloat32, bits.data(), t, cache_n);
      const ops::KvCache kh = half->alloc_kv(cache_n), vh = half->alloc_kv(cache_n);
      ASSERT_EQ(kh.dtype, t);
      for (const ops::KvCache& kv : {kh, vh})
        ASSERT_TRUE(raw_copy(*half, kv.data, bits.data(), cache_n * 2, cudaMemcpyHostToDevice));
      auto kc = dual(start), vc = dual(start);
      auto cache_of = [&](const ops::KvCache& kv) {
        std::vector<uint16_t> raw(cache_n);
        EXPECT_TRUE(raw_copy(*half, raw.data(), kv.data, cache_n * 2, cudaMemcpyDeviceToHost));
        std::vector<float> f(cache_n);
        ops::convert_weight(raw.data(), t, f.data(), DType::kFloat32, cache_n);
        return f;
      };
      auto run_both = [&](const std::vector<float>& qkv_host, int64_t n_out, auto&& cpu_call, auto&& gpu_call) {
        auto qkv = dual(rounded(qkv_host, t));
        auto out = dual_random(static_cast<size_t>(n_out));
        cpu_call(out.c, qkv.c);
        float* gout = half->alloc(out.n);
        float* gqkv = half->alloc(qkv.n);
        half->upload(gqkv, cpu_of(qkv).data(), qkv.n);
        gpu_call(gout, gqkv);
        EXPECT_TRUE(close(get(*half, gout, out.n), cpu_of(out)));
        half->release(gout);
        half->release(gqkv);
      };
      // Prefill two prompts into rows 2 and 0.
      const std::vector<int32_t> lengths = {40, 17}, prow = {2, 0};
      run_both(random(2 * S * sh.qkv_width(), -2.0f, 2.0f), 2 * S * c.q_heads * c.head_dim,
               [&](float* o, const float* q) { cpu_->context_attention(o, q, 2, S, lengths.data(), row_tables(prow), kc.c, vc.c, sh); },
               [&](float* o, const float* q) { half->context_attention(o, q, 2, S, lengths.data(), row_tables(prow), kh, vh, sh); });
      EXPECT_EQ(cache_of(kh), cpu_of(kc));
      EXPECT_EQ(cache_of(vh), cpu_of(vc));
      // Decode: row 2 at slot 40, row 0 at 17, row 1 at the cache's last slot (over garbage history).
      const std::vector<int32_t> drow = {2, 0, 1}, past = {40, 17, static_cast<int32_t>(max_seq - 1)};
      run_both(random(3 * sh.qkv_width(), -2.0f, 2.0f), 3 * c.q_heads * c.head_dim,
               [&](float* o, const float* q) { cpu_->decode_attention(o, q, 3, row_tables(drow), past.data(), kc.c, vc.c, sh); },
               [&](float* o, const float* q) { half->decode_attention(o, q, 3, row_tables(drow), past.data(), kh, vh, sh); });
      EXPECT_EQ(cache_of(kh), cpu_of(kc));
      // Beam reorder with a row that is both read and overwritten.
      const std::vector<int32_t> dst = {0, 1, 2}, src = {2, 0, 0};
      cpu_->gather_cache_rows(kc.c, dst.data(), src.data(), 3, sh.block_elems());
      half->gather_cache_rows(kh, dst.data(), src.data(), 3, sh.block_elems());
      EXPECT_EQ(cache_of(kh), cpu_of(kc));
      half->release_kv(kh);
      half->release_kv(vh);
    }
}

// The INT8 KV cache (--int8-kv-cache): the GPU stores x · (1/scale) rounded to nearest even and
// saturated (cvt.rni.sat.s8.f32), the CPU twin ops::quantize_kv, so the two int8 caches must be
// equal byte for byte (inputs reach ±3.2 with a scale of 0.021: some saturate), and the attention
// outputs within the fp32 tolerance: prefill, decode over up to 1000 slots, a beam-style gather and
// a growth copy.
TEST_F(CudaVsCpu, Int8KvCache) {
  for (const AttnCase& c : {kAttnCases[0], kAttnCases[1], kAttnCases[2], kAttnCases[4], kAttnCases[8]}) {
    SCOPED_TRACE(attn_name(c));
    auto gpu8 = ops::make_backend("cuda", 1);
    auto cpu8 = ops::make_backend("cpu", 1);
    const int64_t rows = 3, max_seq = 1000, S = 40;
    const float scale = 0.021f;
    std::vector<float> slopes;
    const auto sh = attn_shape(c, max_seq, slopes);
    const size_t cache_n = static_cast<size_t>(rows * sh.block_elems());
    // The same starting bytes on both (untouched slots must survive as they are).
    std::vector<int8_t> start(cache_n);
    for (int8_t& b : start) b = static_cast<int8_t>(random_int(-128, 127));
    ops::KvCache kg = gpu8->alloc_kv(cache_n, DType::kInt8), vg = gpu8->alloc_kv(cache_n, DType::kInt8);
    ops::KvCache kc = cpu8->alloc_kv(cache_n, DType::kInt8), vc = cpu8->alloc_kv(cache_n, DType::kInt8);
    ASSERT_EQ(kg.dtype, DType::kInt8);
    for (ops::KvCache* kv : {&kg, &vg, &kc, &vc}) kv->scale = scale;
    for (const ops::KvCache& kv : {kg, vg})
      ASSERT_TRUE(raw_copy(*gpu8, kv.data, start.data(), cache_n, cudaMemcpyHostToDevice));
    std::memcpy(kc.data, start.data(), cache_n);
    std::memcpy(vc.data, start.data(), cache_n);
    auto bytes_of = [&](const ops::KvCache& kv) {
      std::vector<int8_t> raw(cache_n);
      EXPECT_TRUE(raw_copy(*gpu8, raw.data(), kv.data, cache_n, cudaMemcpyDeviceToHost));
      return raw;
    };
    auto host_bytes = [&](const ops::KvCache& kv) {
      return std::vector<int8_t>(kv.int8(), kv.int8() + cache_n);
    };
    auto run_both = [&](const std::vector<float>& qkv_host, int64_t n_out, auto&& cpu_call, auto&& gpu_call) {
      std::vector<float> cout(static_cast<size_t>(n_out)), gout_host(static_cast<size_t>(n_out));
      cpu_call(cout.data(), qkv_host.data());
      float* gout = gpu8->alloc(cout.size());
      float* gqkv = gpu8->alloc(qkv_host.size());
      gpu8->upload(gqkv, qkv_host.data(), qkv_host.size());
      gpu_call(gout, gqkv);
      gpu8->download(gout_host.data(), gout, cout.size());
      EXPECT_TRUE(close(gout_host, cout));
      gpu8->release(gout);
      gpu8->release(gqkv);
    };
    const std::vector<int32_t> lengths = {40, 17}, prow = {2, 0};
    run_both(random(2 * S * sh.qkv_width(), -3.2f, 3.2f), 2 * S * c.q_heads * c.head_dim,
             [&](float* o, const float* q) { cpu8->context_attention(o, q, 2, S, lengths.data(), row_tables(prow), kc, vc, sh); },
             [&](float* o, const float* q) { gpu8->context_attention(o, q, 2, S, lengths.data(), row_tables(prow), kg, vg, sh); });
    EXPECT_EQ(bytes_of(kg), host_bytes(kc));
    EXPECT_EQ(bytes_of(vg), host_bytes(vc));
    const std::vector<int32_t> drow = {2, 0, 1}, past = {40, 17, static_cast<int32_t>(max_seq - 1)};
    run_both(random(3 * sh.qkv_width(), -3.2f, 3.2f), 3 * c.q_heads * c.head_dim,
             [&](float* o, const float* q) { cpu8->decode_attention(o, q, 3, row_tables(drow), past.data(), kc, vc, sh); },
             [&](float* o, const float* q) { gpu8->decode_attention(o, q, 3, row_tables(drow), past.data(), kg, vg, sh); });
    EXPECT_EQ(bytes_of(kg), host_bytes(kc));
    EXPECT_EQ(bytes_of(vg), host_bytes(vc));
    const std::vector<int32_t> dst = {0, 1, 2}, src = {2, 0, 0};
    cpu8->gather_cache_rows(kc, dst.data(), src.data(), 3, sh.block_elems());
    gpu8->gather_cache_rows(kg, dst.data(), src.data(), 3, sh.block_elems());
    EXPECT_EQ(bytes_of(kg), host_bytes(kc));
    // Growth: every (row, head) block of max_seq·d int8 elements into a cache of twice the slots.
    const int64_t blocks = rows * sh.kv_heads, old_pitch = max_seq * sh.head_dim;
    ops::KvCache bigg = gpu8->alloc_kv(cache_n * 2, DType::kInt8), bigc = cpu8->alloc_kv(cache_n * 2, DType::kInt8);
    bigg.scale = bigc.scale = scale;
    std::memset(bigc.data, 0, cache_n * 2);
    std::vector<int8_t> zeros(cache_n * 2, 0);
    ASSERT_TRUE(raw_copy(*gpu8, bigg.data, zeros.data(), cache_n * 2, cudaMemcpyHostToDevice));
    cpu8->copy_kv_2d(bigc, 2 * old_pitch, kc, old_pitch, old_pitch, blocks);
    gpu8->copy_kv_2d(bigg, 2 * old_pitch, kg, old_pitch, old_pitch, blocks);
    std::vector<int8_t> gbig(cache_n * 2);
    ASSERT_TRUE(raw_copy(*gpu8, gbig.data(), bigg.data, cache_n * 2, cudaMemcpyDeviceToHost));
    EXPECT_EQ(gbig, std::vector<int8_t>(bigc.int8(), bigc.int8() + cache_n * 2));
    for (const ops::KvCache& kv : {kg, vg, bigg}) gpu8->release_kv(kv);
    for (const ops::KvCache& kv : {kc, vc, bigc}) cpu8->release_kv(kv);
  }
}

// Beam reordering of an int8 cache whose rows are an odd number of bytes (and rows of 1, 2, 4 and 8
// bytes, each a narrower copy unit): every byte moves, none past the row, as on the CPU. A copy in
// 2-byte units dropped the last byte of an odd row and read misaligned halves.
TEST_F(CudaVsCpu, GatherInt8CacheRowsOfAnyByteLength) {
  auto gpu8 = ops::make_backend("cuda", 1);
  auto cpu8 = ops::make_backend("cpu", 1);
  const std::vector<int32_t> dst = {0, 1, 2, 3, 4}, src = {4, 0, 0, 1, 2};  // fan-out and a cycle
  for (int64_t row_elems : {1, 2, 3, 4, 7, 8, 13, 24, 4097}) {
    SCOPED_TRACE("row bytes " + std::to_string(row_elems));
    const size_t n = static_cast<size_t>(5 * row_elems);
    std::vector<int8_t> start(n);
    for (int8_t& b : start) b = static_cast<int8_t>(random_int(-128, 127));
    ops::KvCache g = gpu8->alloc_kv(n, DType::kInt8), c = cpu8->alloc_kv(n, DType::kInt8);
    ASSERT_TRUE(raw_copy(*gpu8, g.data, start.data(), n, cudaMemcpyHostToDevice));
    std::memcpy(c.data, start.data(), n);
    cpu8->gather_cache_rows(c, dst.data(), src.data(), 5, row_elems);
    gpu8->gather_cache_rows(g, dst.data(), src.data(), 5, row_elems);
    std::vector<int8_t> got(n);
    ASSERT_TRUE(raw_copy(*gpu8, got.data(), g.data, n, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, std::vector<int8_t>(c.int8(), c.int8() + n));
    gpu8->release_kv(g);
    cpu8->release_kv(c);
  }
}
#endif

// Prefill then decode steps on both: the cache written by one path is read by the other.
TEST_F(CudaVsCpu, PrefillThenDecode) {
  for (const AttnCase& c : kAttnCases) {
    SCOPED_TRACE(attn_name(c));
    const int64_t B = 3, S = 9, max_seq = 20;
    std::vector<float> slopes;
    const auto sh = attn_shape(c, max_seq, slopes);
    std::vector<int32_t> lengths = {9, 2, 5}, rows = {1, 2, 0};
    auto kc = dual_random(B * sh.block_elems()), vc = dual_random(B * sh.block_elems());
    auto qkv = dual(random(B * S * sh.qkv_width()));
    auto out = dual_random(B * S * c.q_heads * c.head_dim);
    cpu_->context_attention(out.c, qkv.c, B, S, lengths.data(), row_tables(rows), kc.c, vc.c, sh);
    gpu_->context_attention(out.g, qkv.g, B, S, lengths.data(), row_tables(rows), kc.g, vc.g, sh);
    for (int step = 0; step < 4; ++step) {
      auto q1 = dual(random(B * sh.qkv_width()));
      cpu_->decode_attention(out.c, q1.c, B, row_tables(rows), lengths.data(), kc.c, vc.c, sh);
      gpu_->decode_attention(out.g, q1.g, B, row_tables(rows), lengths.data(), kc.g, vc.g, sh);
      for (auto& l : lengths) ++l;
    }
    EXPECT_TRUE(same(out));
    EXPECT_TRUE(same(kc));
    EXPECT_TRUE(same(vc));
  }
}

TEST_F(CudaVsCpu, GatherCacheRows) {
  struct Case {
    std::vector<int32_t> dst, src;
  };
  const Case cases[] = {
      {{0, 1}, {1, 0}},                  // swap
      {{0, 1, 2}, {1, 2, 0}},            // cycle
      {{1, 2, 3}, {0, 0, 0}},            // fan-out of one parent
      {{0, 1, 2, 3, 4}, {0, 0, 1, 1, 4}},  // beam reorder with identity pairs
      {{2, 2, 1}, {0, 1, 3}},            // repeated dst: the last pair wins
      {{3}, {3}},                        // nothing to do
  };
  for (const Case& c : cases)
    for (int64_t row_elems : {7, 64, 4096}) {
      SCOPED_TRACE("row_elems " + std::to_string(row_elems) + " first dst " + std::to_string(c.dst[0]));
      auto cache = dual_random(5 * row_elems);
      cpu_->gather_cache_rows(cache.c, c.dst.data(), c.src.data(), static_cast<int64_t>(c.dst.size()), row_elems);
      gpu_->gather_cache_rows(cache.g, c.dst.data(), c.src.data(), static_cast<int64_t>(c.dst.size()), row_elems);
      EXPECT_EQ(gpu_of(cache), cpu_of(cache));
    }
}

// The Engine on both backends over the fixture models: same greedy tokens (each backend picks its
// own argmax; the CPU's token is fed to both so the paths stay comparable), logits within 1e-4,
// including after a beam-style copy_rows; and no device allocation after reserve().
class CudaEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEngine, GreedyMatchesCpu) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
  dist::SingleRank comm;
  auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
  Engine ec(wc, *cpu, comm), eg(wg, *gpu, comm);
  const int64_t B = static_cast<int64_t>(e.prompts.size()), V = e.vocab, steps = 6;
  int64_t longest = 0;
  for (const auto& p : e.prompts) longest = std::max<int64_t>(longest, p.size());
  // One spare row for copy_rows.
  ec.reserve(B + 1, longest + steps + 1, B * longest);
  eg.reserve(B + 1, longest + steps + 1, B * longest);
  std::vector<int32_t> rows(B);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> lc(B * V), lg(B * V);
  ec.prefill(e.prompts, rows, lc.data());
  eg.prefill(e.prompts, rows, lg.data());
#ifdef FTX_HAVE_CUDA
  const auto* impl = dynamic_cast<const cuda::CudaBackend*>(gpu.get());
  ASSERT_NE(impl, nullptr);
  const size_t blocks_after_prefill = impl->arena().blocks();
#endif
  auto argmax = [V](const float* l) { return static_cast<int32_t>(std::max_element(l, l + V) - l); };
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int32_t> tokens(B);
    for (int64_t b = 0; b < B; ++b) {
      EXPECT_TRUE(test::logits_close(lg.data() + b * V, lc.data() + b * V, V, 1e-4))
          << "prompt " << b << " step " << s;
      tokens[b] = argmax(lc.data() + b * V);
      EXPECT_EQ(argmax(lg.data() + b * V), tokens[b]) << "prompt " << b << " step " << s;
    }
    if (s == 2) {  // beam fan-out: the spare row takes row 1's history
      ec.copy_rows({static_cast<int32_t>(B)}, {1});
      eg.copy_rows({static_cast<int32_t>(B)}, {1});
    }
    std::vector<int32_t> feed = tokens, active = rows;
    if (s >= 2) {
      feed.push_back(tokens[1]);
      active.push_back(static_cast<int32_t>(B));
    }
    std::vector<float> c2(feed.size() * V), g2(feed.size() * V);
    ec.decode(feed, active, c2.data());
    eg.decode(feed, active, g2.data());
    for (size_t i = B; i < feed.size(); ++i)  // the copied row: CPU vs CUDA
      EXPECT_TRUE(test::logits_close(g2.data() + i * V, c2.data() + i * V, V, 1e-4)) << "copied row, step " << s;
    std::copy(c2.begin(), c2.begin() + B * V, lc.begin());
    std::copy(g2.begin(), g2.begin() + B * V, lg.begin());
  }
#ifdef FTX_HAVE_CUDA
  EXPECT_EQ(impl->arena().blocks(), blocks_after_prefill) << "decode steps allocated new device blocks";
#endif
}

// The INT8 KV cache on the GPU: logits along the float64 emulation's greedy paths within 1e-4 of
// it (tests/reference/int8_kv_reference.py; the CPU's own check is EngineReference), same tokens.
TEST_P(CudaEngine, Int8KvCacheMatchesEmulation) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir, "int8_kv_cache/fp");
  if (e.prompts.empty()) GTEST_SKIP() << "no int8 KV-cache reference for " << GetParam();
  auto gpu = ops::make_backend("cuda", 1);
  QuantPolicy int8_kv;
  int8_kv.int8_kv_cache = true;
  dist::SingleRank comm;
  const auto o = test::run_greedy_paths_on(*gpu, dir + "/1-gpu", e, comm, {}, int8_kv);
  test::expect_greedy_paths_match(o, e, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngine, ::testing::ValuesIn(test::engine_model_names()),
                         [](const auto& info) { return info.param; });

// The Engine with fp16/bf16 weights on the GPU against the CPU's fp32 run of the same files:
// logits within the dtype's tolerance of the row's largest |logit| at every step (both fed the
// CPU's greedy tokens: with rounded weights a near-tie may pick another token), a padded batch
// equal to its prompts one by one, and the same logits bit for bit on a second run. Activations
// held in the half type end to end (the default, FasterTransformer's way) and in fp32
// (CudaBackendOptions::act_dtype). With half activations a prompt alone and the same prompt in a
// padded batch may round an element differently (other GEMM kernels sum in another order), so the
// two are held to half the dtype's tolerance rather than the fp32 activations' 1e-3.
class CudaEngineHalf : public ::testing::TestWithParam<std::tuple<std::string, DType, bool>> {};

TEST_P(CudaEngineHalf, LogitsWithinTolerance) {
  REQUIRE_CUDA_DEVICE();
  const auto& [model, t, fp32_activations] = GetParam();
  const std::string dir = test::engine_fixtures() + "/" + model;
  const auto e = test::load_expected(dir);
  auto cpu = ops::make_backend("cpu", 1);
#ifdef FTX_HAVE_CUDA
  cuda::CudaBackendOptions options;
  options.weight_dtype = t;
  if (fp32_activations) options.act_dtype = DType::kFloat32;
  auto gpu = cuda::make_cuda_backend(options);
  EXPECT_EQ(gpu->act_dtype(), fp32_activations ? DType::kFloat32 : t);
#else
  auto gpu = ops::make_backend("cuda", 1, t);
#endif
  dist::SingleRank comm;
  auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
  EXPECT_EQ(wg.layers[0].qkv_w.dtype, t);
  EXPECT_EQ(wg.wte.dtype, t);
  Engine ec(wc, *cpu, comm), eg(wg, *gpu, comm);
  const int64_t B = static_cast<int64_t>(e.prompts.size()), V = e.vocab, steps = 5;
  int64_t longest = 0;
  for (const auto& p : e.prompts) longest = std::max<int64_t>(longest, p.size());
  ec.reserve(B, longest + steps + 1, B * longest);
  eg.reserve(B, longest + steps + 1, B * longest);
  std::vector<int32_t> rows(B);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> lc(B * V), lg(B * V);
  ec.prefill(e.prompts, rows, lc.data());
  eg.prefill(e.prompts, rows, lg.data());
  const std::vector<float> first_prefill = lg;
  const double tol = half_tolerance(t);
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int32_t> tokens(B);
    for (int64_t b = 0; b < B; ++b) {
      EXPECT_TRUE(test::logits_close(lg.data() + b * V, lc.data() + b * V, V, tol)) << "prompt " << b << " step " << s;
      tokens[b] = static_cast<int32_t>(std::max_element(lc.begin() + b * V, lc.begin() + (b + 1) * V) -
                                       (lc.begin() + b * V));
    }
    ec.decode(tokens, rows, lc.data());
    eg.decode(tokens, rows, lg.data());
  }
  // Deterministic: the same prefill again gives the same bits; each prompt alone gives its row of
  // the padded batch (within the GEMM's rounding: a batch of 1 may take another cuBLASLt kernel).
  std::vector<float> again(B * V);
  eg.prefill(e.prompts, rows, again.data());
  EXPECT_EQ(again, first_prefill);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<float> one(V);
    eg.prefill({e.prompts[b]}, {0}, one.data());
    EXPECT_TRUE(test::logits_close(one.data(), first_prefill.data() + b * V, V, fp32_activations ? 1e-3 : tol / 2))
        << "prompt " << b << " alone";
  }
}

std::vector<std::tuple<std::string, DType, bool>> half_engine_cases() {
  std::vector<std::tuple<std::string, DType, bool>> out;
  for (const auto& m : test::engine_model_names())
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (bool fp32_activations : {false, true}) out.emplace_back(m, t, fp32_activations);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngineHalf, ::testing::ValuesIn(half_engine_cases()), [](const auto& info) {
  return std::get<0>(info.param) + (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16") +
         (std::get<2>(info.param) ? "_fp32act" : "");
});

#ifdef FTX_HAVE_CUDA
// --int8-mode 1 --dtype bf16 on the GPU with fp32 activations: int8 layers on activations rounded
// to bf16, the embedding table and lm_head in bf16, an fp32 KV cache; the float64 emulation's logits along its greedy
// paths at the CPU twin's bounds (engine_test_util.h's kInt8Bf16Tolerance per logit, which admits
// a bf16 rounding flip, and the median over prompts of the RMS gap a quarter of the gap to an
// emulation that skips rounding A) and its greedy tokens. A GEMM that skipped the rounding of A,
// or rounded the dequantised weights q · scale to bf16 (which the emulation keeps exact), would
// sit further away.
class CudaInt8WithBf16Tables : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaInt8WithBf16Tables, MatchesEmulationAtTheCpuTolerance) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir, "half_weights/int8_bf16/tp1");
  ASSERT_FALSE(e.prompts.empty());
  cuda::CudaBackendOptions o;
  o.weight_dtype = DType::kBFloat16;
  o.kv_dtype = DType::kFloat32;
  o.act_dtype = DType::kFloat32;  // the emulation's (and the CPU twin's) fp32 activations
  auto gpu = cuda::make_cuda_backend(o);
  QuantPolicy int8;
  int8.int8_weight_only = true;
  dist::SingleRank comm;
  const auto got = test::run_greedy_paths_on(*gpu, dir + "/1-gpu", e, comm, {}, int8);
  for (size_t b = 0; b < e.prompts.size(); ++b)
    for (size_t s = 0; s < got.steps[b].size(); ++s) {
      const auto& l = got.steps[b][s];
      EXPECT_TRUE(test::logits_close(l.data(), e.greedy_logits[b][s].data(), e.vocab, test::kInt8Bf16Tolerance))
          << "prompt " << b << " step " << s;
      EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]) << "prompt " << b << " step " << s;
    }
  const double here = test::median_prompt_rms(got, e);
  const double unrounded =
      test::median_prompt_rms(got, test::load_expected(dir, "half_weights/int8_bf16_unrounded_layers/tp1"));
  std::printf("%s: median RMS prompt-logit gap %.2e, to the unrounded-A emulation %.2e\n", GetParam().c_str(), here,
              unrounded);
  EXPECT_LT(here, 0.25 * unrounded);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaInt8WithBf16Tables, ::testing::Values("gpt2", "gptj", "gptneox", "bloom"),
                         [](const auto& info) { return info.param; });
#endif

// Whole generations on the GPU: beam search (3 beams, diversity and length penalty) and seeded
// top-k/top-p sampling give the same tokens on a second run, in fp32 and fp16; in fp32 a padded
// batch gives each request what it gets alone (greedy), and the greedy tokens equal the CPU's.
class CudaGenerate : public ::testing::TestWithParam<std::string> {};

std::vector<GenerationOutput> generate_on(ops::Backend& be, const std::string& dir,
                                          const std::vector<DecodeRequest>& requests) {
  dist::SingleRank comm;
  auto w = ModelWeights::load(dir + "/1-gpu", 0, 1, be);
  Engine eng(w, be, comm);
  SchedulerOptions opt;
  opt.batch_size = static_cast<int64_t>(requests.size());  // one padded batch
  Scheduler scheduler(eng, comm, opt);
  return scheduler.run_all(requests);
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<GenerationOutput>& outs) {
  std::vector<std::vector<int32_t>> t;
  for (const auto& o : outs)
    for (const auto& b : o.result.beams) t.push_back(b.output_ids);
  return t;
}

TEST_P(CudaGenerate, DeterministicAndBatchIndependent) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  auto requests_with = [&](SamplingConfig s) {
    std::vector<DecodeRequest> r;
    for (const auto& p : e.prompts) r.push_back({p, 6, s});
    return r;
  };
  SamplingConfig beam;
  beam.beam_width = 3;
  beam.beam_search_diversity_rate = 0.5;
  beam.len_penalty = 1.0;
  SamplingConfig sample;
  sample.top_k = 5;
  sample.top_p = 0.9;
  sample.temperature = 0.8;
  sample.seed = 1234;
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    auto gpu = ops::make_backend("cuda", 1, t);
    for (const SamplingConfig& s : {beam, sample}) {
      const auto first = tokens_of(generate_on(*gpu, dir, requests_with(s)));
      const auto second = tokens_of(generate_on(*gpu, dir, requests_with(s)));
      // Every beam of every request made its 6 tokens (no end_id), so equality is not vacuous.
      ASSERT_EQ(first.size(), e.prompts.size() * static_cast<size_t>(s.beam_width));
      for (const auto& t : first) EXPECT_EQ(t.size(), 6u);
      EXPECT_EQ(first, second) << (s.beam_width > 1 ? "beam search" : "sampling") << " differs between runs";
    }
  }
  // Greedy: the CUDA engine's padded batch and each prompt alone (other GEMM shapes) follow the CPU
  // engine's path, up to near ties (within the fp32 logit tolerance, 1e-4 of the row) that another
  // summation order may break the other way.
  auto gpu = ops::make_backend("cuda", 1);
  auto cpu = ops::make_backend("cpu", 1);
  dist::SingleRank comm;
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
  auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
  Engine eg(wg, *gpu, comm), ec(wc, *cpu, comm);
  const auto ref = test::greedy_traces(ec, e.prompts, 6, /*alone=*/false);
  const auto batch = test::greedy_traces(eg, e.prompts, 6, /*alone=*/false);
  const auto alone = test::greedy_traces(eg, e.prompts, 6, /*alone=*/true);
  for (size_t i = 0; i < e.prompts.size(); ++i) {
    EXPECT_TRUE(test::same_tokens_up_to_ties(ref[i], batch[i].tokens, 1e-4)) << "prompt " << i << " in the batch";
    EXPECT_TRUE(test::same_tokens_up_to_ties(ref[i], alone[i].tokens, 1e-4)) << "prompt " << i << " alone";
    EXPECT_TRUE(test::logits_close(batch[i].logits[0].data(), ref[i].logits[0].data(), e.vocab, 1e-4));
    EXPECT_TRUE(test::logits_close(alone[i].logits[0].data(), batch[i].logits[0].data(), e.vocab, 1e-4));
  }
  // The scheduler's greedy requests (a padded batch of them) take the engine's path too.
  const auto scheduled = tokens_of(generate_on(*gpu, dir, requests_with(SamplingConfig{})));
  for (size_t i = 0; i < e.prompts.size(); ++i)
    EXPECT_TRUE(test::same_tokens_up_to_ties(ref[i], scheduled[i], 1e-4)) << "prompt " << i << " scheduled";
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGenerate, ::testing::Values("gpt2", "gptj", "bloom", "santacoder"),
                         [](const auto& info) { return info.param; });

#ifdef FTX_HAVE_CUDA
// Decode steps as CUDA graphs (CudaBackendOptions::graphs) give the same bits as eager launches:
// the graph holds the same kernels in the same order. Over several steps with the batch shrinking
// (a new key: measured, captured, replayed), a beam-style copy_rows between steps, and a second
// reserve() (new buffers: the old graphs must not be replayed).
class CudaGraphs : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGraphs, DecodeStepsEqualEagerLaunches) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  cuda::CudaBackendOptions with_graphs;
  with_graphs.graphs = true;
  auto eager = ops::make_backend("cuda", 1);
  auto graphed = cuda::make_cuda_backend(with_graphs);
  const auto* impl = dynamic_cast<const cuda::CudaBackend*>(graphed.get());
  ASSERT_NE(impl, nullptr);
  ASSERT_TRUE(impl->graphs());
  dist::SingleRank comm;
  auto we = ModelWeights::load(dir + "/1-gpu", 0, 1, *eager);
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *graphed);
  Engine ee(we, *eager, comm), eg(wg, *graphed, comm);
  const int64_t B = static_cast<int64_t>(e.prompts.size()), V = e.vocab;
  int64_t longest = 0;
  for (const auto& p : e.prompts) longest = std::max<int64_t>(longest, p.size());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const int64_t steps = 8;
    ee.reserve(B + 1 + round, longest + steps + 1, B * longest + round);  // round 1 reallocates
    eg.reserve(B + 1 + round, longest + steps + 1, B * longest + round);
    test::expect_graph_steps_equal_eager(ee, eg, e.prompts, V, steps, /*shrink_at=*/4);
    // Each batch size ran 4 times: measured, captured, replayed twice.
    EXPECT_GE(impl->graphs_recorded(), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraphs, ::testing::Values("gpt2", "santacoder", "gptj", "bloom"),
                         [](const auto& info) { return info.param; });

// Growing the scratch buffer retires the recorded graphs, which hold its old address (the arena may
// hand that memory to the next allocation): when it grows outside a step, and when it grows inside
// a capture (then the graphs go when the capture ends). A step that copies through scratch (an
// overlapping copy) stays right, and memory allocated after a growth is not written by a replay.
TEST(CudaGraphScratch, GrowingScratchRetiresRecordedGraphs) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaBackendOptions with_graphs;
  with_graphs.graphs = true;
  auto be = cuda::make_cuda_backend(with_graphs);
  const auto* impl = dynamic_cast<const cuda::CudaBackend*>(be.get());
  ASSERT_NE(impl, nullptr);
  const size_t n = 64, big = size_t(1) << 22;
  float* x = be->alloc(2 * big + 1);
  // x[0..len] = 0, 1, ...; the step shifts x[0..len) up by one (memmove); true when it did.
  auto shift_step = [&](const std::string& key, size_t len) {
    std::vector<float> host(len + 1);
    std::iota(host.begin(), host.end(), 0.0f);
    be->upload(x, host.data(), host.size());
    ops::RepeatableStep s(*be, key);
    be->copy(x + 1, x, len);
    s.finish();
    std::vector<float> got(len + 1);
    be->download(got.data(), x, got.size());
    for (size_t i = 1; i <= len; ++i)
      if (got[i] != static_cast<float>(i - 1)) return false;
    return got[0] == 0.0f;
  };
  for (int run = 0; run < 3; ++run) EXPECT_TRUE(shift_step("small", n)) << "run " << run;  // measure, capture, replay
  EXPECT_EQ(impl->graphs_recorded(), 1u);

  be->copy(x + 1, x, big);  // outside a step: scratch grows
  EXPECT_EQ(impl->graphs_recorded(), 0u);
  float* fresh = be->alloc(n);  // may be the old scratch
  be->fill(fresh, -7.0f, n);
  for (int run = 0; run < 3; ++run) EXPECT_TRUE(shift_step("small", n)) << "after growth, run " << run;
  EXPECT_EQ(impl->graphs_recorded(), 1u);
  std::vector<float> f(n);
  be->download(f.data(), fresh, n);
  EXPECT_EQ(f, std::vector<float>(n, -7.0f)) << "a replay wrote into memory allocated after the growth";

  // Inside a capture: measured small, captured large (a copy stages no metadata, so the step
  // passes as the same one): scratch grows during the capture.
  EXPECT_TRUE(shift_step("grows", n));
  EXPECT_TRUE(shift_step("grows", 2 * big));
  EXPECT_EQ(impl->graphs_recorded(), 0u);  // "small" retired; "grows" allocated, so not kept
  EXPECT_TRUE(shift_step("small", n));     // captured again
  EXPECT_TRUE(shift_step("small", n));     // replayed
  EXPECT_EQ(impl->graphs_recorded(), 1u);
  be->release(fresh);
  be->release(x);
}
#endif

#ifdef FTX_HAVE_CUDA
// The refusals of the half-precision and graph paths: each a one-line Error saying what is wrong,
// and the backend still usable afterwards (an aborted capture leaves the stream capturing nothing).
TEST(CudaBackendErrors, RefusedInputsLeaveTheBackendUsable) {
  REQUIRE_CUDA_DEVICE();
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  cuda::CudaBackendOptions int8;
  int8.weight_dtype = DType::kInt8;
  EXPECT_NE(message([&] { cuda::make_cuda_backend(int8); }).find("cannot be held in int8"), std::string::npos);

  cuda::CudaBackendOptions with_graphs;
  with_graphs.graphs = true;
  auto be = cuda::make_cuda_backend(with_graphs);
  float* x = be->alloc(256);
  be->fill(x, 0.5f, 256);
  const ops::Weight int8_weight(x, DType::kInt8);
  EXPECT_NE(message([&] { be->gemm(1, 4, 4, x, int8_weight, false, x + 128, 0.0f); }).find("no kernels for int8"),
            std::string::npos);
  ops::AttentionShape sh;
  sh.q_heads = sh.kv_heads = 1;
  sh.head_dim = 4;
  sh.max_seq = sh.block_size = 4;
  const int32_t one = 1, row = 0;
  EXPECT_NE(message([&] {
              be->context_attention(x + 64, x, 1, 1, &one, {&row, 1}, ops::KvCache(x + 128), ops::KvCache(x + 192, DType::kFloat16), sh);
            }).find("K cache in float32, V cache in float16"),
            std::string::npos);
  std::vector<float> host(4);
  be->begin_repeatable("a step");
  EXPECT_NE(message([&] { be->download(host.data(), x, 4); }).find("inside a repeatable step"), std::string::npos);
  be->abort_repeatable();

  // A key's second run (the capture) stages more metadata than its first: refused, capture aborted.
  const std::vector<float> table = random_table(16 * 8);
  const ops::Weight wte = be->upload_weight(table.data(), DType::kFloat32, table.size());
  // Each metadata part is staged in 16-byte units: 2 rows take 16 bytes per part, 8 rows 32.
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8}, pos = {0, 1, 2, 3, 4, 5, 6, 7};
  auto step = [&](int64_t rows) {
    ops::RepeatableStep s(*be, "embed");
    be->embedding(x, wte, nullptr, ops::PositionTable::kNone, 0, ids.data(), pos.data(), rows, 8, 1.0f);
    s.finish();
  };
  step(2);
  EXPECT_NE(message([&] { step(8); }).find("staged more metadata than its first run"), std::string::npos);

  be->fill(x, 2.0f, 4);
  be->download(host.data(), x, 4);
  EXPECT_EQ(host, std::vector<float>(4, 2.0f));
  be->release_weight(wte);
  be->release(x);
}
#endif

#ifdef FTX_HAVE_NCCL
// One rank needs no NCCL communicator: the host one comes back. The NCCL path proper (2+ ranks,
// one GPU each, under mpirun) has no test yet.
TEST(CudaNccl, SingleRankKeepsTheHostCommunicator) {
  REQUIRE_CUDA_DEVICE();
  auto gpu = ops::make_backend("cuda", 1);
  auto comm = cuda::make_nccl_communicator(std::make_unique<dist::SingleRank>(), *gpu);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->rank(), 0);
  auto cpu = ops::make_backend("cpu", 1);
  EXPECT_THROW(cuda::make_nccl_communicator(std::make_unique<dist::SingleRank>(), *cpu), Error);
}
#endif

// Without a device the factory's error says so (runs only where there is no device).
TEST(CudaBackendFactory, NoDeviceIsAClearError) {
  if (have_cuda_device()) GTEST_SKIP() << "a CUDA device is present";
  try {
    ops::make_backend("cuda", 1);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    // Built with CUDA: no device; built without: not built in.
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("no CUDA device found (cudaGetDeviceCount: ") != std::string::npos ||
                msg.find("the CUDA backend is not built in this version") != std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace ftx

namespace ftx {
namespace {

#ifdef FTX_HAVE_CUDA  // the half-cache part reads device memory with cudaMemcpy
// copy_kv_2d (growing the KV cache keeps every row): a pitched block copy, equal to the CPU's, in
// fp32 and in a half cache; the destination's other slots are left alone. And the backend reports
// free device memory for the engine's up-front check.
TEST_F(CudaVsCpu, CopyKv2dGrowsACacheLikeTheCpu) {
  const int64_t height = 6, width = 40, src_pitch = 48, dst_pitch = 112;
  const auto src = random(static_cast<size_t>(height * src_pitch));
  const auto dst = random(static_cast<size_t>(height * dst_pitch));
  auto s = dual(src), d = dual(dst);
  cpu_->copy_kv_2d(ops::KvCache(d.c), dst_pitch, ops::KvCache(s.c), src_pitch, width, height);
  gpu_->copy_kv_2d(ops::KvCache(d.g), dst_pitch, ops::KvCache(s.g), src_pitch, width, height);
  EXPECT_EQ(get(*gpu_, d.g, d.n), cpu_of(d));
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    auto half = ops::make_backend("cuda", 1, t);
    const ops::KvCache hs = half->alloc_kv(src.size()), hd = half->alloc_kv(dst.size());
    std::vector<uint16_t> sb(src.size()), db(dst.size());
    ops::convert_weight(src.data(), DType::kFloat32, sb.data(), t, src.size());
    ops::convert_weight(dst.data(), DType::kFloat32, db.data(), t, dst.size());
    ASSERT_TRUE(raw_copy(*half, hs.data, sb.data(), sb.size() * 2, cudaMemcpyHostToDevice));
    ASSERT_TRUE(raw_copy(*half, hd.data, db.data(), db.size() * 2, cudaMemcpyHostToDevice));
    half->copy_kv_2d(hd, dst_pitch, hs, src_pitch, width, height);
    std::vector<uint16_t> got(db.size());
    ASSERT_TRUE(raw_copy(*half, got.data(), hd.data, got.size() * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < height; ++i)
      for (int64_t j = 0; j < dst_pitch; ++j)
        EXPECT_EQ(got[i * dst_pitch + j], j < width ? sb[i * src_pitch + j] : db[i * dst_pitch + j]);
    half->release_kv(hs);
    half->release_kv(hd);
  }
  EXPECT_GT(gpu_->available_memory(), size_t(1) << 20);
}
#endif

}  // namespace
}  // namespace ftx

namespace ftx {
namespace {

// Appending to rows that already hold tokens (a session's next round): context_attention with past
// offsets equals the CPU's, cache and outputs.
TEST_F(CudaVsCpu, ContextAttentionAppendsAfterPast) {
  for (const AttnCase& c : kAttnCases) {
    SCOPED_TRACE(attn_name(c));
    const int64_t cache_rows = 4, max_seq = 120, S = 19;
    std::vector<float> slopes;
    const auto sh = attn_shape(c, max_seq, slopes);
    const std::vector<int32_t> lengths = {19, 4, 1}, rows = {2, 0, 3}, past = {0, 33, 100};
    const int64_t B = 3;
    auto qkv = dual(random(B * S * sh.qkv_width(), -2.0f, 2.0f));
    auto kc = dual_random(cache_rows * sh.block_elems()), vc = dual_random(cache_rows * sh.block_elems());
    auto out = dual_random(B * S * c.q_heads * c.head_dim);
    cpu_->context_attention(out.c, qkv.c, B, S, lengths.data(), row_tables(rows), kc.c, vc.c, sh, past.data());
    gpu_->context_attention(out.g, qkv.g, B, S, lengths.data(), row_tables(rows), kc.g, vc.g, sh, past.data());
    EXPECT_TRUE(same(out));
    EXPECT_TRUE(same(kc));
    EXPECT_TRUE(same(vc));
  }
}

// The paged layout: each row's blocks anywhere in the pool, in block sizes that split a key tile
// (1, 16) or hold two (64). A prefill, an append after it and decode steps, against the CPU twin:
// outputs, and both whole pools (blocks no row holds keep their garbage).
TEST_F(CudaVsCpu, PagedAttention) {
  for (const AttnCase& c : kAttnCases)
    for (const int64_t bs : {int64_t(1), int64_t(16), int64_t(64)}) {
      SCOPED_TRACE(attn_name(c) + " block size " + std::to_string(bs));
      const int64_t max_seq = 192, B = 3, S = 37, stride = max_seq / bs, blocks = B * stride + 5;
      std::vector<float> slopes;
      auto sh = attn_shape(c, max_seq, slopes);
      sh.block_size = bs;
      std::vector<int32_t> ids(static_cast<size_t>(blocks));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), std::mt19937(static_cast<uint32_t>(bs)));
      ids.resize(static_cast<size_t>(B * stride));
      const ops::BlockTables tables{ids.data(), stride};
      auto kc = dual_random(blocks * sh.block_elems()), vc = dual_random(blocks * sh.block_elems());
      std::vector<int32_t> lengths = {37, 20, 1};
      auto qkv = dual(random(B * S * sh.qkv_width(), -2.0f, 2.0f));
      auto out = dual_random(B * S * c.q_heads * c.head_dim);
      cpu_->context_attention(out.c, qkv.c, B, S, lengths.data(), tables, kc.c, vc.c, sh);
      gpu_->context_attention(out.g, qkv.g, B, S, lengths.data(), tables, kc.g, vc.g, sh);
      EXPECT_TRUE(same(out));
      const std::vector<int32_t> more = {3, 30, 17};
      auto qkv2 = dual(random(B * 30 * sh.qkv_width(), -2.0f, 2.0f));
      auto out2 = dual_random(B * 30 * c.q_heads * c.head_dim);
      cpu_->context_attention(out2.c, qkv2.c, B, 30, more.data(), tables, kc.c, vc.c, sh, lengths.data());
      gpu_->context_attention(out2.g, qkv2.g, B, 30, more.data(), tables, kc.g, vc.g, sh, lengths.data());
      EXPECT_TRUE(same(out2));
      for (int64_t b = 0; b < B; ++b) lengths[b] += more[b];
      for (int step = 0; step < 3; ++step) {
        auto q1 = dual(random(B * sh.qkv_width(), -2.0f, 2.0f));
        auto o1 = dual_random(B * c.q_heads * c.head_dim);
        cpu_->decode_attention(o1.c, q1.c, B, tables, lengths.data(), kc.c, vc.c, sh);
        gpu_->decode_attention(o1.g, q1.g, B, tables, lengths.data(), kc.g, vc.g, sh);
        EXPECT_TRUE(same(o1)) << "step " << step;
        for (auto& l : lengths) ++l;
      }
      EXPECT_TRUE(same(kc));
      EXPECT_TRUE(same(vc));
    }
}

// A circular cache (memory_len): decode positions before, at and well past the wrap, against the
// CPU (slot = position % memory_len, attention over the last memory_len positions, ALiBi by
// position).
TEST_F(CudaVsCpu, DecodeAttentionOverACircularCache) {
  for (const AttnCase& c : kAttnCases) {
    SCOPED_TRACE(attn_name(c));
    const int64_t M = 48, cache_rows = 5;
    std::vector<float> slopes;
    auto sh = attn_shape(c, M, slopes);
    sh.memory_len = M;
    const std::vector<int32_t> rows = {1, 4, 0, 3, 2}, past = {3, 47, 48, 100, 1000};
    const int64_t n = 5;
    auto qkv = dual(random(n * sh.qkv_width(), -2.0f, 2.0f));
    auto kc = dual_random(cache_rows * sh.block_elems()), vc = dual_random(cache_rows * sh.block_elems());
    auto out = dual_random(n * c.q_heads * c.head_dim);
    cpu_->decode_attention(out.c, qkv.c, n, row_tables(rows), past.data(), kc.c, vc.c, sh);
    gpu_->decode_attention(out.g, qkv.g, n, row_tables(rows), past.data(), kc.g, vc.g, sh);
    EXPECT_TRUE(same(out));
    EXPECT_TRUE(same(kc));
    EXPECT_TRUE(same(vc));
  }
}

// A session round on the GPU: the logits after appending round 2 to a row's cached context, and
// with a circular cache after wrapping it, equal the CPU engine's (1e-4).
class CudaSessions : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSessions, AppendAndCircularCacheMatchCpu) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  for (const int64_t memory : {int64_t(0), int64_t(8)}) {
    SCOPED_TRACE("memory_len " + std::to_string(memory));
    auto cpu = ops::make_backend("cpu", 1);
    auto gpu = ops::make_backend("cuda", 1);
    dist::SingleRank comm;
    auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
    auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
    Engine ec(wc, *cpu, comm, EngineOptions{memory}), eg(wg, *gpu, comm, EngineOptions{memory});
    const int64_t V = e.vocab;
    ec.reserve(1, 64, 64);
    eg.reserve(1, 64, 64);
    std::vector<float> lc(V), lg(V);
    ec.prefill({e.prompts[1]}, {0}, lc.data());
    eg.prefill({e.prompts[1]}, {0}, lg.data());
    EXPECT_TRUE(test::logits_close(lg.data(), lc.data(), V, 1e-4));
    for (const auto& round : {e.prompts[2], e.prompts[0], e.prompts[3]}) {
      ec.append({round}, {0}, lc.data());
      eg.append({round}, {0}, lg.data());
      EXPECT_TRUE(test::logits_close(lg.data(), lc.data(), V, 1e-4)) << "after " << ec.row_length(0) << " tokens";
      const int32_t t = static_cast<int32_t>(std::max_element(lc.begin(), lc.end()) - lc.begin());
      ec.decode({t}, {0}, lc.data());
      eg.decode({t}, {0}, lg.data());
      EXPECT_TRUE(test::logits_close(lg.data(), lc.data(), V, 1e-4));
    }
    EXPECT_EQ(eg.row_length(0), ec.row_length(0));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaSessions, ::testing::Values("gpt2", "gptneox", "bloom"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ftx

namespace ftx {
namespace {

// Continuous batching on the GPU: requests of different lengths and parameters, run 3 at a time
// with finished rows refilled at once, get the tokens each gets alone (fp32).
TEST(CudaScheduler, ContinuousBatchingEqualsOneByOne) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/gptneox/1-gpu";
  auto gpu = ops::make_backend("cuda", 1);
  dist::SingleRank comm;
  auto w = ModelWeights::load(dir, 0, 1, *gpu);
  std::vector<DecodeRequest> reqs;
  for (int i = 0; i < 12; ++i) {
    DecodeRequest r;
    for (int t = 0; t <= i % 5; ++t) r.input_ids.push_back(3 + 17 * i + 5 * t);
    r.max_new_tokens = 2 + (7 * i) % 11;
    r.sampling.seed = static_cast<uint64_t>(i);
    if (i % 3 == 1) r.sampling.top_p = 0.9;
    if (i % 4 == 2) r.sampling.top_k = 5;
    reqs.push_back(r);
  }
  auto run = [&](int64_t batch) {
    Engine eng(w, *gpu, comm);
    SchedulerOptions o;
    o.batch_size = batch;
    Scheduler s(eng, comm, o);
    return s.run_all(reqs);
  };
  const auto alone = run(1), together = run(3);
  // Greedy requests (neither top-k nor top-p): each run follows the CPU engine's path of the request
  // alone, up to near ties another GEMM shape may break the other way (1e-4 of the row). Sampled
  // ones: the same tokens; a flip there needs a uniform draw within rounding (~1e-6) of a boundary
  // of the cumulative distribution, which these few dozen draws do not come near.
  auto cpu = ops::make_backend("cpu", 1);
  auto wc = ModelWeights::load(dir, 0, 1, *cpu);
  Engine ec(wc, *cpu, comm);
  auto expect_same = [&](const std::vector<DecodeRequest>& rs, const std::vector<GenerationOutput>& x,
                         const std::vector<GenerationOutput>& y, const char* what) {
    for (size_t i = 0; i < rs.size(); ++i) {
      const auto& t = x[i].result.beams[0].output_ids;
      const auto& a = y[i].result.beams[0].output_ids;
      if (rs[i].sampling.top_k == 0 && rs[i].sampling.top_p == 0.0) {
        const auto ref = test::greedy_traces(ec, {rs[i].input_ids}, rs[i].max_new_tokens, true)[0];
        EXPECT_TRUE(test::same_tokens_up_to_ties(ref, t, 1e-4)) << what << " request " << i;
        EXPECT_TRUE(test::same_tokens_up_to_ties(ref, a, 1e-4)) << what << " request " << i;
      } else {
        EXPECT_EQ(t, a) << what << " request " << i;
      }
    }
  };
  expect_same(reqs, together, alone, "batched and alone:");
  // The paged cache on the GPU: 16 tokens per block, a budget of a few requests' blocks (requests
  // preempted and prefilled again), a prefix the requests share: the same tokens with and without
  // the budget, greedy ones the CPU engine's up to ties (a resumed request's prefill is another GEMM shape).
  std::vector<DecodeRequest> shared = reqs;
  for (auto& r : shared) r.input_ids.insert(r.input_ids.begin(), 40, 7);
  auto paged = [&](bool budget) {
    EngineOptions eo;
    eo.block_size = 16;
    if (budget) {
      Engine probe(w, *gpu, comm, eo);
      eo.kv_cache.kind = kv::KvCacheBudget::Kind::kBytes;
      eo.kv_cache.value = static_cast<double>(8 * probe.kv_block_bytes());
    }
    Engine eng(w, *gpu, comm, eo);
    SchedulerOptions o;
    o.batch_size = 6;
    Scheduler s(eng, comm, o);
    auto out = s.run_all(shared);
    EXPECT_EQ(eng.kv_cache().referenced(), 0);
    if (budget) EXPECT_GT(s.stats().preemptions, 0);
    EXPECT_GT(eng.tokens_reused(), 0);
    return out;
  };
  const auto roomy = paged(false), tight = paged(true);
  expect_same(shared, tight, roomy, "paged, preempted and not:");
}

}  // namespace
}  // namespace ftx
