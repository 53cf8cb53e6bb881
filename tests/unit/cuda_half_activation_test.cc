// Half activations on the CUDA backend (act_dtype(): the weights' fp16/bf16 by default, as
// FasterTransformer runs a half model): every op that reads or writes activations, on activations
// held in fp16 or bf16, against its CPU twin in fp32 on the same numbers. Inputs are drawn in fp32
// and rounded to the half type first, so both sides start from identical values; the GPU computes
// in fp32 and rounds each result once, where it stores it. Its result is therefore the CPU's fp32
// result rounded to the half type, or (when the two fp32 computations land on either side of a
// rounding boundary) the neighbouring half value. Tolerance, element-wise:
//     |gpu_i - cpu_i| <= ulp_T(cpu_i) + 1e-5 · max(1, scale_i)
// ulp_T: the half type's spacing at |cpu_i|; scale_i: |cpu_i|, or for GEMM outputs Σ_k |a_ik|·|b_kj|
// (cuda_backend_test.cc's fp32 rule). Where an op's result feeds its own second step (a residual
// written back, then normalised), the CPU twin runs the two steps with the rounded intermediate.
// Label gpu: skips itself without a GPU (gpu_test_util.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/error.h"
#include "gpu_test_util.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/model/model_config.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/cuda_backend.h"
#include "lib/ops/host_math.h"
#endif

namespace ftx {
namespace {

// x rounded to t (fp16/bf16, nearest even) and widened back.
float round_to(DType t, float x) {
  uint16_t h = 0;
  float back = 0.0f;
  ops::convert_weight(&x, DType::kFloat32, &h, t, 1);
  ops::convert_weight(&h, t, &back, DType::kFloat32, 1);
  return back;
}

// The spacing of t's values at |x| (its smallest subnormal spacing near zero).
double ulp_of(DType t, double x) {
  const int mantissa = t == DType::kFloat16 ? 10 : 7;
  const int min_exp = t == DType::kFloat16 ? -14 : -126;
  const double a = std::fabs(x);
  const int e = a > 0 ? std::max(static_cast<int>(std::floor(std::log2(a))), min_exp) : min_exp;
  return std::ldexp(1.0, e - mantissa);
}

class HalfActivations : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
#ifdef FTX_HAVE_CUDA
    t_ = GetParam();
    cuda::CudaBackendOptions o;
    o.weight_dtype = t_;
    gpu_ = cuda::make_cuda_backend(o);
    ASSERT_EQ(gpu_->act_dtype(), t_);
    cpu_ = std::make_unique<cpu::CpuBackend>(1);
    rng_.seed(1234);
#endif
  }
  void TearDown() override {
    for (const ops::Act& a : acts_) gpu_->release_act(a);
    for (float* p : params_) gpu_->release(p);
  }

  // n values uniform in [lo, hi), rounded to the half type: what both sides hold.
  std::vector<float> values(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = round_to(t_, u(rng_));
    return v;
  }
  int32_t random_int(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  // GPU activations holding `host` (exactly: its values are half-representable).
  ops::Act act(const std::vector<float>& host) {
    ops::Act a = gpu_->alloc_act(host.size());
    EXPECT_EQ(a.dtype, t_);
    acts_.push_back(a);
    gpu_->upload_act(a, host.data(), host.size());
    return a;
  }
  std::vector<float> get(const ops::Act& a, size_t n) {
    std::vector<float> v(n);
    gpu_->download_act(v.data(), a, n);
    return v;
  }
  // An fp32 GPU buffer (biases, norm parameters).
  float* param(const std::vector<float>& host) {
    float* p = gpu_->alloc(host.size());
    params_.push_back(p);
    gpu_->upload(p, host.data(), host.size());
    return p;
  }
  std::vector<float> rounded(std::vector<float> v) const {
    for (float& x : v) x = round_to(t_, x);
    return v;
  }
  ::testing::AssertionResult close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                   const std::vector<double>* scale = nullptr) const {
    if (gpu.size() != cpu.size()) return ::testing::AssertionFailure() << "sizes differ";
    for (size_t i = 0; i < gpu.size(); ++i) {
      const double s = scale ? (*scale)[i] : std::fabs(static_cast<double>(cpu[i]));
      const double d = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
      if (!(d <= ulp_of(t_, cpu[i]) + 1e-5 * std::max(1.0, s)))
        return ::testing::AssertionFailure() << "element " << i << " of " << gpu.size() << ": cuda " << gpu[i]
                                             << ", cpu " << cpu[i] << " (|diff| " << d << ", " << dtype_name(t_)
                                             << " ulp " << ulp_of(t_, cpu[i]) << ")";
    }
    return ::testing::AssertionSuccess();
  }
  // Σ_k |a_mk|·|b_kn| for row-major a [M, K] and b [K, N] (or [N, K] with trans_b).
  static std::vector<double> gemm_scale(const std::vector<float>& a, const std::vector<float>& b, int64_t M, int64_t N,
                                        int64_t K, bool trans_b) {
    std::vector<double> s(static_cast<size_t>(M * N), 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          s[m * N + n] += std::fabs(static_cast<double>(a[m * K + k]) * (trans_b ? b[n * K + k] : b[k * N + n]));
    return s;
  }

  DType t_ = DType::kFloat16;
  std::unique_ptr<ops::Backend> gpu_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::mt19937 rng_;
  std::vector<ops::Act> acts_;
  std::vector<float*> params_;
};

TEST_P(HalfActivations, UploadDownloadAndCopy) {
  const auto host = values(1000, -70.0f, 70.0f);
  const ops::Act a = act(host);
  EXPECT_EQ(get(a, host.size()), host);
  // A raw fp32 upload is rounded on the way in.
  std::vector<float> wide(257);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (float& x : wide) x = u(rng_);
  const ops::Act w = gpu_->alloc_act(wide.size());
  acts_.push_back(w);
  gpu_->upload_act(w, wide.data(), wide.size());
  EXPECT_EQ(get(w, wide.size()), rounded(wide));
  // copy_act moves elements, overlapping ranges with memmove's result, offsets in elements.
  std::vector<float> want = host;
  std::memmove(want.data() + 3, want.data(), 500 * sizeof(float));
  gpu_->copy_act(a + 3, a, 500);
  EXPECT_EQ(get(a, host.size()), want);
  // Activations of another dtype are refused, naming both.
  float* f = gpu_->alloc(8);
  params_.push_back(f);
  EXPECT_THROW(gpu_->copy_act(a, ops::Act(f), 8), Error);
}

TEST_P(HalfActivations, LayerAndRmsNorm) {
  for (int64_t H : {5, 64, 1000, 9001})
    for (bool rms : {false, true})
      for (bool in_place : {false, true}) {
        SCOPED_TRACE("H " + std::to_string(H) + (rms ? " rms" : " layer") + (in_place ? " in place" : ""));
        const int64_t rows = 3;
        auto x = values(rows * H, -3.0f, 5.0f), gamma = values(H), beta = values(H);
        std::vector<float> out(x.size());
        const ops::Act gx = act(x), gout = in_place ? gx : act(values(x.size()));
        if (rms) {
          cpu_->rms_norm(out.data(), x.data(), gamma.data(), rows, H, 1e-5f);
          gpu_->rms_norm(gout, gx, param(gamma), rows, H, 1e-5f);
        } else {
          cpu_->layer_norm(out.data(), x.data(), gamma.data(), beta.data(), rows, H, 1e-5f);
          gpu_->layer_norm(gout, gx, param(gamma), param(beta), rows, H, 1e-5f);
        }
        EXPECT_TRUE(close(get(gout, out.size()), out));
        if (!in_place) EXPECT_EQ(get(gx, x.size()), x) << "x is only read";
      }
}

// x += y + bias written back rounded, then the norm of that rounded x.
TEST_P(HalfActivations, AddResidualNorms) {
  for (int64_t H : {3, 128, 9000})
    for (bool rms : {false, true})
      for (int variant = 0; variant < 3; ++variant) {  // 0: y+bias+norm  1: y+norm  2: y+bias, no norm
        SCOPED_TRACE("H " + std::to_string(H) + (rms ? " rms" : " layer") + " variant " + std::to_string(variant));
        const int64_t rows = 4;
        auto x = values(rows * H), y = values(rows * H), bias = values(H), gamma = values(H), beta = values(H);
        const bool with_bias = variant != 1, norm = variant != 2;
        const ops::Act gx = act(x), gy = act(y), gout = act(values(x.size()));
        float* gb = param(bias);
        if (rms)
          gpu_->add_residual_rms_norm(gx, gy, with_bias ? gb : nullptr, norm ? param(gamma) : nullptr,
                                      norm ? gout : ops::Act(), rows, H, 1e-6f);
        else
          gpu_->add_residual_layer_norm(gx, gy, with_bias ? gb : nullptr, norm ? param(gamma) : nullptr,
                                        norm ? param(beta) : nullptr, norm ? gout : ops::Act(), rows, H, 1e-6f);
        // The CPU twin: the residual in fp32, x rounded as the GPU stores it, then the norm.
        cpu_->add_residual_layer_norm(x.data(), y.data(), with_bias ? bias.data() : nullptr, nullptr, nullptr,
                                      nullptr, rows, H, 1e-6f);
        const std::vector<float> x_fp32 = x;
        x = rounded(x);
        EXPECT_TRUE(close(get(gx, x.size()), x_fp32)) << "the residual";
        if (!norm) continue;
        std::vector<float> out(x.size());
        if (rms)
          cpu_->rms_norm(out.data(), x.data(), gamma.data(), rows, H, 1e-6f);
        else
          cpu_->layer_norm(out.data(), x.data(), gamma.data(), beta.data(), rows, H, 1e-6f);
        EXPECT_TRUE(close(get(gout, out.size()), out)) << "the norm";
      }
}

TEST_P(HalfActivations, BiasAndActivation) {
  const Activation acts[] = {Activation::kGelu, Activation::kGeluTanh, Activation::kRelu, Activation::kSilu,
                             Activation::kSwiGlu, Activation::kGeGlu, Activation::kGeGluTanh, Activation::kSquaredRelu};
  for (Activation fn : acts)
    for (int64_t N : {7, 1024}) {
      SCOPED_TRACE("act " + std::string(activation_name(fn)) + " N " + std::to_string(N));
      const int64_t rows = 3;
      const bool gated = fn.is_gated();
      auto x = values(rows * N, -4.0f, 4.0f), bias = values(N), gate = values(rows * N), gate_bias = values(N);
      const ops::Act gx = act(x), gg = act(gate);
      gpu_->add_bias(gx, param(bias), rows, N);
      cpu_->add_bias(x.data(), bias.data(), rows, N);
      EXPECT_TRUE(close(get(gx, x.size()), x)) << "add_bias";
      x = rounded(x);
      gpu_->bias_activation(gx, param(bias), gated ? gg : ops::Act(), gated ? param(gate_bias) : nullptr, rows, N, fn);
      cpu_->bias_activation(x.data(), bias.data(), gated ? gate.data() : nullptr, gated ? gate_bias.data() : nullptr,
                            rows, N, fn);
      EXPECT_TRUE(close(get(gx, x.size()), x)) << "bias_activation";
    }
}

TEST_P(HalfActivations, EmbeddingAndRotary) {
  const int64_t V = 40, P = 600, H = 64, rows = 9;
  std::vector<int32_t> ids(rows), pos(rows);
  for (int64_t r = 0; r < rows; ++r) {
    ids[r] = random_int(0, V - 1);
    pos[r] = random_int(0, P - 1);
  }
  const auto wte = values(V * H), wpe = values(P * H);
  for (auto table : {ops::PositionTable::kNone, ops::PositionTable::kLearned, ops::PositionTable::kSinusoidal}) {
    SCOPED_TRACE("table " + std::to_string(static_cast<int>(table)));
    const bool learned = table == ops::PositionTable::kLearned;
    const ops::Weight wg = gpu_->upload_weight(wte.data(), DType::kFloat32, wte.size());  // held in t_, exactly
    ASSERT_EQ(wg.dtype, t_);
    std::vector<float> out(rows * H);
    const ops::Act gout = act(values(out.size()));
    gpu_->embedding(gout, wg, learned ? param(wpe) : nullptr, table, 0, ids.data(), pos.data(), rows, H, 1.5f);
    cpu_->embedding(out.data(), wte.data(), learned ? wpe.data() : nullptr, table, 0, ids.data(), pos.data(), rows, H,
                    1.5f);
    EXPECT_TRUE(close(get(gout, out.size()), out));
    gpu_->release_weight(wg);
  }
  for (RotaryStyle style : {RotaryStyle::kInterleaved, RotaryStyle::kHalfSplit}) {
    const int64_t heads = 3, d = 32, rot = 16, stride = 5 * d;
    auto qkv = values(rows * stride, -2.0f, 2.0f);
    const ops::Act g = act(qkv);
    gpu_->rotary(g, rows, stride, pos.data(), heads, d, rot, style, 10000.0);
    cpu_->rotary(qkv.data(), rows, stride, pos.data(), heads, d, rot, style, 10000.0);
    EXPECT_TRUE(close(get(g, qkv.size()), qkv)) << "rotary style " << static_cast<int>(style);
  }
}

// Prefill of a padded batch, then decode steps reading what it stored: half QKV rows in, half
// outputs out; the GPU's cache holds K and V in the half type (they are half values already), the
// CPU's in fp32 (the same values).
TEST_P(HalfActivations, Attention) {
  struct Case {
    int64_t q_heads, kv_heads, d;
    bool alibi;
  };
  for (const Case c : {Case{4, 4, 16, false}, Case{6, 2, 64, false}, Case{4, 1, 128, true}}) {
    SCOPED_TRACE("q_heads " + std::to_string(c.q_heads) + " kv_heads " + std::to_string(c.kv_heads) + " d " +
                 std::to_string(c.d));
    const int64_t B = 3, S = 40, max_seq = 64;
    ops::AttentionShape sh;
    sh.q_heads = c.q_heads;
    sh.kv_heads = c.kv_heads;
    sh.head_dim = c.d;
    sh.max_seq = max_seq;
    sh.block_size = 16;
    sh.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
    std::vector<float> slopes;
    if (c.alibi) {
      slopes = ops::alibi_slopes(c.q_heads);
      sh.alibi_slopes = slopes.data();
    }
    const int64_t per_row = max_seq / sh.block_size;
    std::vector<int32_t> table(B * per_row);
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(table.size() - 1 - i);  // scattered
    const ops::BlockTables bt{table.data(), per_row};
    const size_t cache_n = table.size() * static_cast<size_t>(sh.block_elems());
    const ops::KvCache kg = gpu_->alloc_kv(cache_n), vg = gpu_->alloc_kv(cache_n);
    ASSERT_EQ(kg.dtype, t_);
    std::vector<float> kc(cache_n), vc(cache_n);
    std::vector<int32_t> lengths = {40, 7, 23};
    auto qkv = values(B * S * sh.qkv_width(), -2.0f, 2.0f);
    std::vector<float> out(B * S * c.q_heads * c.d);
    const ops::Act gq = act(qkv), gout = act(values(out.size()));
    gpu_->context_attention(gout, gq, B, S, lengths.data(), bt, kg, vg, sh);
    cpu_->context_attention(out.data(), qkv.data(), B, S, lengths.data(), bt, kc.data(), vc.data(), sh);
    EXPECT_TRUE(close(get(gout, out.size()), out)) << "prefill";
    for (int step = 0; step < 3; ++step) {
      auto q1 = values(B * sh.qkv_width(), -2.0f, 2.0f);
      std::vector<float> o1(B * c.q_heads * c.d);
      const ops::Act g1 = act(q1), go1 = act(values(o1.size()));
      gpu_->decode_attention(go1, g1, B, bt, lengths.data(), kg, vg, sh);
      cpu_->decode_attention(o1.data(), q1.data(), B, bt, lengths.data(), kc.data(), vc.data(), sh);
      EXPECT_TRUE(close(get(go1, o1.size()), o1)) << "decode step " << step;
      for (auto& l : lengths) ++l;
    }
    gpu_->release_kv(kg);
    gpu_->release_kv(vg);
  }
}

// Half weights and half activations: C in the half type (a layer's output) or fp32 (the logits),
// B row-major or transposed (the tied lm_head); the CPU twin holds the same weights in the half
// type (its GEMM rounds A, here already half) and sums in fp32.
TEST_P(HalfActivations, FloatGemm) {
  cpu::CpuBackend cpu_half(1, t_);
  struct Shape {
    int64_t M, N, K;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 3072, 1024}, Shape{5, 96, 128}, Shape{37, 1000, 64}})
    for (bool trans_b : {false, true})
      for (bool c_fp32 : {false, true}) {
        SCOPED_TRACE("M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K) +
                     (trans_b ? " B transposed" : "") + (c_fp32 ? " fp32 C" : ""));
        const auto a = values(s.M * s.K), b = values(s.K * s.N);
        const ops::Weight wg = gpu_->upload_weight(b.data(), DType::kFloat32, b.size());
        const ops::Weight wc = cpu_half.upload_weight(b.data(), DType::kFloat32, b.size());
        std::vector<float> want(s.M * s.N);
        cpu_half.gemm(s.M, s.N, s.K, a.data(), wc, trans_b, want.data(), 0.0f);
        const ops::Act ga = act(a);
        std::vector<float> got(want.size());
        if (c_fp32) {
          float* c = param(std::vector<float>(want.size(), 0.0f));
          gpu_->gemm(s.M, s.N, s.K, ga, wg, trans_b, c, 0.0f);
          gpu_->download(got.data(), c, got.size());
        } else {
          const ops::Act c = act(values(want.size()));
          gpu_->gemm(s.M, s.N, s.K, ga, wg, trans_b, c, 0.0f);
          got = get(c, got.size());
        }
        const auto scale = gemm_scale(a, b, s.M, s.N, s.K, trans_b);
        EXPECT_TRUE(close(got, want, &scale));
        gpu_->release_weight(wg);
        cpu_half.release_weight(wc);
      }
}

// Weight-only INT8 and SmoothQuant W8A8 on half activations: the same int8 matrices on both sides,
// the outputs rounded to the half type once.
TEST_P(HalfActivations, QuantisedGemms) {
  cpu::CpuBackend cpu_half(1, t_);
  for (int64_t M : {1, 9, 40}) {
    SCOPED_TRACE("M " + std::to_string(M));
    const int64_t N = 384, K = 256;
    const auto a = values(M * K), b = values(K * N);
    const auto scale = gemm_scale(a, b, M, N, K, false);
    const ops::Act ga = act(a);
    {  // weight-only: (A · q) · diag(scale), A already in the half type
      const ops::Weight wg = gpu_->upload_weight_int8(b.data(), DType::kFloat32, K, N);
      const ops::Weight wc = cpu_half.upload_weight_int8(b.data(), DType::kFloat32, K, N);
      ASSERT_EQ(wg.input_dtype, t_);
      std::vector<float> want(M * N);
      cpu_half.gemm(M, N, K, a.data(), wc, false, want.data(), 0.0f);
      const ops::Act c = act(values(want.size()));
      gpu_->gemm(M, N, K, ga, wg, false, c, 0.0f);
      EXPECT_TRUE(close(get(c, want.size()), want, &scale)) << "weight-only int8";
      gpu_->release_weight(wg);
      cpu_half.release_weight(wc);
    }
    {  // W8A8, per-token (activations quantised from the half values)
      std::vector<int8_t> q(K * N);
      std::vector<float> alpha(N);
      for (auto& v : q) v = static_cast<int8_t>(random_int(-127, 127));
      for (auto& v : alpha) v = 1e-3f * static_cast<float>(random_int(1, 100));
      const ops::Weight wg = gpu_->upload_weight_w8a8(q.data(), K, N, alpha.data(), 0.0f, 1.0f);
      const ops::Weight wc = cpu_->upload_weight_w8a8(q.data(), K, N, alpha.data(), 0.0f, 1.0f);
      std::vector<float> want(M * N);
      cpu_->gemm(M, N, K, a.data(), wc, false, want.data(), 0.0f);
      const ops::Act c = act(values(want.size()));
      gpu_->gemm(M, N, K, ga, wg, false, c, 0.0f);
      EXPECT_TRUE(close(get(c, want.size()), want)) << "W8A8";
      gpu_->release_weight(wg);
      cpu_->release_weight(wc);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfActivations, ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

#ifdef FTX_HAVE_CUDA
// fp32 activations with half weights stay available (FTX_CUDA_FP32_ACTIVATIONS=1, the option), and
// half activations never come with fp32 weights.
TEST(HalfActivationOptions, Fp32ActivationsAndRefusedMixes) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaBackendOptions o;
  o.weight_dtype = DType::kBFloat16;
  o.act_dtype = DType::kFloat32;
  EXPECT_EQ(cuda::make_cuda_backend(o)->act_dtype(), DType::kFloat32);
  o.weight_dtype = DType::kFloat32;
  o.act_dtype = DType::kFloat16;
  EXPECT_THROW(cuda::make_cuda_backend(o), Error);
  o.act_dtype.reset();
  EXPECT_EQ(cuda::make_cuda_backend(o)->act_dtype(), DType::kFloat32);
}
#endif

}  // namespace
}  // namespace ftx
