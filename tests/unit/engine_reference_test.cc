// The CPU engine against the float64 PyTorch reference (tests/reference/gpt_reference.py) on the
// tiny fixture models of scripts/fixtures/make_engine_models.py: GPT-2 (fp16 files), Megatron
// (bf16), GPT-Next (RoPE half-split 50%, SwiGLU, no bias, untied), SantaCoder (MQA), GPT-J
// (interleaved RoPE, parallel residual, lm_head bias), BLOOM (ALiBi, 6 heads, pre-decoder LN),
// OPT post-LN (ReLU).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine_test_util.h"
#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/engine/runtime.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/ops/backend_registry.h"

namespace ftx {
namespace {

class EngineReference : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() { return test::engine_fixtures() + "/" + GetParam(); }
};
// The same over the models with INT8 references (test::engine_int8_model_names): each must have
// them, so a fixture that lost one fails instead of skipping.
class EngineInt8Reference : public EngineReference {};

// Prompt logits and every greedy step's logits within 1e-4 (test::logits_close), and the argmax of
// each step equal to the reference's greedy token.
TEST_P(EngineReference, LogitsAndGreedyMatchReference) {
  const auto e = test::load_expected(dir());
  dist::SingleRank comm;
  const auto o = test::run_greedy_paths(dir() + "/1-gpu", e, comm);
  for (size_t b = 0; b < e.prompts.size(); ++b) {
    ASSERT_EQ(o.steps[b].size(), e.greedy_logits[b].size());
    EXPECT_TRUE(test::logits_close(o.steps[b][0].data(), e.prompt_logits[b].data(), e.vocab, 1e-4))
        << "prompt " << b;
    for (size_t s = 0; s < o.steps[b].size(); ++s) {
      EXPECT_TRUE(test::logits_close(o.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, 1e-4))
          << "prompt " << b << " step " << s;
      const auto& l = o.steps[b][s];
      EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]) << "prompt " << b << " step " << s;
    }
  }
}

// Weight-only INT8 (FT's int8_mode 1): logits along the emulation's greedy paths within 1e-4 of
// the float64 emulation of the same quantised arithmetic (tests/reference/int8_reference.py), and
// the same greedy tokens; the weights held shrink to int8 plus one scale per column.
TEST_P(EngineInt8Reference, WeightOnlyMatchesEmulation) {
  // With --int8-lm-head the lm_head table is quantised per row as well: the same tolerance against
  // an emulation that quantises it, which the plain int8 reference must not also pass.
  for (const bool head : {false, true}) {
    SCOPED_TRACE(head ? "--int8-lm-head" : "int8_mode 1");
    const auto e = test::load_expected(dir(), head ? "int8_weight_only/tp1_head" : "int8_weight_only/tp1");
    ASSERT_FALSE(e.prompts.empty()) << "no int8 reference for " << GetParam();
    dist::SingleRank comm;
    const auto o = test::run_greedy_paths(dir() + "/1-gpu", e, comm, /*int8_weight_only=*/true,
                                          /*int8_kv_cache=*/false, /*int8_lm_head=*/head);
    test::expect_greedy_paths_match(o, e, 1e-4);
    // The emulation is not the model it quantises: the check above would pass for unquantised
    // weights (or an unquantised head) only if quantisation changed nothing, which the random
    // weights rule out.
    const auto fp = test::load_expected(dir(), head ? "int8_weight_only/tp1" : "");
    EXPECT_GT(test::largest_prompt_logit_gap(e, fp), 1e-3)
        << "the two references agree: the test would not see a missing quantisation";
  }
}

// INT8 KV cache (--int8-kv-cache): K and V stored as int8 with each layer's scale (the fixture's
// scale_y_quant_orig files) and dequantised as read. Logits along the emulation's greedy paths
// within 1e-4 of the float64 emulation (tests/reference/int8_kv_reference.py), the same greedy
// tokens; with fp32 weights and with weight-only INT8 (int8_mode 1).
TEST_P(EngineInt8Reference, KvCacheMatchesEmulation) {
  for (const bool weight_only : {false, true}) {
    SCOPED_TRACE(weight_only ? "int8_mode 1" : "fp32 weights");
    const auto e = test::load_expected(dir(), weight_only ? "int8_kv_cache/weight_only_tp1" : "int8_kv_cache/fp");
    ASSERT_FALSE(e.prompts.empty()) << "no int8 KV-cache reference for " << GetParam();
    dist::SingleRank comm;
    const auto o = test::run_greedy_paths(dir() + "/1-gpu", e, comm, weight_only, /*int8_kv_cache=*/true);
    double worst = 0;  // the largest |engine - emulation| / max(1, row max |logit|), reported
    for (size_t b = 0; b < e.prompts.size(); ++b) {
      ASSERT_EQ(o.steps[b].size(), e.greedy_logits[b].size());
      for (size_t s = 0; s < o.steps[b].size(); ++s) {
        double row = 1;
        for (double x : e.greedy_logits[b][s]) row = std::max(row, std::fabs(x));
        for (int64_t i = 0; i < e.vocab; ++i)
          worst = std::max(worst, std::fabs(o.steps[b][s][i] - e.greedy_logits[b][s][i]) / row);
        EXPECT_TRUE(test::logits_close(o.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, 1e-4))
            << "prompt " << b << " step " << s;
        const auto& l = o.steps[b][s];
        EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]) << "prompt " << b << " step " << s;
      }
    }
    std::printf("%s %s: int8 KV cache vs emulation, largest |diff| / row max %.2e\n", GetParam().c_str(),
                weight_only ? "int8_mode 1" : "fp32 weights", worst);
    // The quantised cache must matter, or the check above could not see it missing.
    const auto fp = test::load_expected(dir(), weight_only ? "int8_weight_only/tp1" : "");
    EXPECT_GT(test::largest_prompt_logit_gap(e, fp), 1e-3) << "the int8 KV-cache emulation equals the floating-point one";
  }
}

TEST(EngineInt8, WeightsHeldAsInt8) {
  const std::string dir = test::engine_fixtures() + "/gpt2/1-gpu";
  cpu::CpuBackend fp(1), q(1);
  QuantPolicy int8;
  int8.int8_weight_only = true;
  auto wf = ModelWeights::load(dir, 0, 1, fp);
  auto wq = ModelWeights::load(dir, 0, 1, q, int8);
  ASSERT_EQ(wq.layers[0].qkv_w.dtype, DType::kInt8);
  ASSERT_NE(wq.layers[0].qkv_w.scale, nullptr);
  EXPECT_EQ(wq.wte.dtype, DType::kFloat32);  // embeddings and lm_head stay floating point
  // Layer matrices: 1 byte per element plus a 4-byte scale per column, instead of 4 bytes.
  size_t saved = 0;
  for (const FtWeightFile& f : ft_weight_files(wf.config(), 1)) {
    const bool matrix = f.name.rfind("model.layers.", 0) == 0 && f.shape.size() >= 2;
    if (matrix) saved += static_cast<size_t>(f.numel()) * 3 - static_cast<size_t>(f.numel() / f.shape[0]) * 4;
  }
  ASSERT_GT(saved, 0u);
  EXPECT_EQ(wf.bytes() - wq.bytes(), saved);
}

// --int8-lm-head: the table [N, K] quantised per row, used transposed (C = A · dequant(table)^T),
// held to a float64 evaluation over the dequantised rows, A rounded to the model's float type first
// as in the layers; with one row and many, every ISA level the CPU has (FTX_CPU_ISA in CI), and a K
// that is not a multiple of any level's lanes.
TEST(EngineInt8, LmHeadTableQuantisedPerRowIsUsedTransposed) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t N = 37, K = 203;
  std::vector<float> table(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) table[n * K + k] = nd(rng) * static_cast<float>(1 + n % 5);  // rows of unlike ranges
  for (const DType model : {DType::kFloat32, DType::kBFloat16}) {
    cpu::CpuBackend be(2, model);
    const ops::Weight q = be.upload_weight_int8_rows(table.data(), DType::kFloat32, N, K);
    ASSERT_TRUE(q.int8_rows);
    for (const int64_t M : {int64_t{1}, int64_t{5}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(model) << " M=" << M);
      std::vector<float> a(M * K), c(M * N, 0.0f);
      for (auto& v : a) v = nd(rng);
      be.gemm(M, N, K, a.data(), q, /*trans_b=*/true, c.data(), 0.0f);
      for (int64_t n = 0; n < N; ++n) {
        // FT's rule on the row: scale max|row| / 128, round half away from zero, clamp to 127.
        float amax = 0.0f;
        for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(table[n * K + k]));
        const float scale = amax / 128.0f;
        for (int64_t m = 0; m < M; ++m) {
          double want = 0, size = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double qv = std::min(127.0, static_cast<double>(std::round(table[n * K + k] / scale)));
            float x = a[m * K + k];
            if (model == DType::kBFloat16) x = bf16_to_float(float_to_bf16(x));
            want += static_cast<double>(x) * qv;
            size += std::fabs(static_cast<double>(x) * qv);
          }
          want *= scale;
          EXPECT_NEAR(c[m * N + n], want, 1e-6 * size * scale + 1e-30) << "row " << m << " output " << n;
        }
      }
    }
    // Each the other way round is refused, not misread.
    float a1[K] = {}, c1[N] = {};
    EXPECT_THROW(be.gemm(1, N, K, a1, q, /*trans_b=*/false, c1, 0.0f), Error);
    be.release_weight(q);
  }
}

// --int8-lm-head: refused without weight-only quantisation, and by a backend without an int8 transposed GEMM
// (a CPU backend that says it has none stands in for the CUDA one, which stops earlier here: no GPU).
TEST(EngineInt8, Int8LmHeadIsRefusedWhereItCannotRun) {
  struct NoInt8Head : cpu::CpuBackend {
    NoInt8Head() : cpu::CpuBackend(1) {}
    std::string name() const override { return "no-int8-head"; }
    bool int8_lm_head_supported() const override { return false; }
  };
  ops::register_backend("no-int8-head", [](const ops::BackendOptions&) { return std::make_unique<NoInt8Head>(); });
  RuntimeOptions o;
  o.int8_lm_head = true;
  for (const int mode : {0, 2}) {
    o.int8_mode = mode;
    EXPECT_THROW(
        try { make_runtime(o); } catch (const UsageError& e) {
          EXPECT_NE(std::string(e.what()).find("--int8-lm-head applies to weight-only quantisation (--int8-mode 1 or --weight-only-precision int4)"), std::string::npos) << e.what();
          throw;
        },
        UsageError);
  }
  o.int8_mode = 1;
  o.device = "no-int8-head";
  EXPECT_THROW(
      try { make_runtime(o); } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--int8-lm-head: the no-int8-head backend has no int8 lm_head GEMM"),
                  std::string::npos)
            << e.what();
        throw;
      },
      UsageError);
  o.device = "cpu";
  EXPECT_NO_THROW(make_runtime(o));
}

// A layer's int8 weight is only ever [K, N]: a transposed use is refused, not misread.
TEST(EngineInt8, TransposedInt8WeightIsAnError) {
  cpu::CpuBackend be(1);
  const std::vector<float> w = {1.0f, -2.0f, 0.5f, 4.0f};
  const ops::Weight q = be.upload_weight_int8(w.data(), DType::kFloat32, 2, 2);
  float a[2] = {1.0f, 1.0f}, c[2] = {0.0f, 0.0f};
  EXPECT_THROW(be.gemm(1, 2, 2, a, q, /*trans_b=*/true, c, 0.0f), Error);
  // FT's scale is max/128, so a column's largest |w| maps to 128 and is clamped to 127:
  // column 0 (1, 0.5): q = (127, 64) x 1/128; column 1 (-2, 4): q = (-64, 127) x 4/128.
  be.gemm(1, 2, 2, a, q, false, c, 0.0f);
  EXPECT_FLOAT_EQ(c[0], 191.0f / 128.0f);
  EXPECT_FLOAT_EQ(c[1], 63.0f / 32.0f);
  be.release_weight(q);
}

// A right-padded batch gives each prompt the logits it gets alone (1e-5), including after decode
// steps (rows of different lengths advance independently).
TEST_P(EngineReference, PaddedBatchEqualsOneByOne) {
  const auto e = test::load_expected(dir());
  dist::SingleRank comm;
  const auto batched = test::run_greedy_paths(dir() + "/1-gpu", e, comm);
  for (size_t b = 0; b < e.prompts.size(); ++b) {
    test::Expected one = e;
    one.prompts = {e.prompts[b]};
    one.greedy = {e.greedy[b]};
    const auto alone = test::run_greedy_paths(dir() + "/1-gpu", one, comm);
    ASSERT_EQ(alone.steps[0].size(), batched.steps[b].size());
    for (size_t s = 0; s < alone.steps[0].size(); ++s)
      EXPECT_TRUE(test::logits_close(batched.steps[b][s].data(), alone.steps[0][s].data(), e.vocab, 1e-5))
          << "prompt " << b << " step " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineReference, ::testing::ValuesIn(test::engine_model_names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Models, EngineInt8Reference, ::testing::ValuesIn(test::engine_int8_model_names()),
                         [](const auto& info) { return info.param; });

// copy_rows gives a row another row's history: both then decode the same logits (beam fan-out;
// 1e-6: rows of one GEMM may round differently).
TEST(EngineRows, CopiedRowDecodesLikeItsSource) {
  const std::string dir = test::engine_fixtures() + "/gpt2";
  const auto e = test::load_expected(dir);
  cpu::CpuBackend be(2);
  dist::SingleRank comm;
  auto w = ModelWeights::load(dir + "/1-gpu", 0, 1, be);
  Engine eng(w, be, comm);
  eng.reserve(3, 32, 16);
  std::vector<float> logits(3 * e.vocab);
  eng.prefill({e.prompts[2]}, {0}, logits.data());
  eng.copy_rows({1, 2}, {0, 0});
  EXPECT_EQ(eng.row_length(2), static_cast<int64_t>(e.prompts[2].size()));
  eng.decode({7, 7, 7}, {0, 1, 2}, logits.data());
  for (int r = 1; r < 3; ++r)
    EXPECT_TRUE(test::logits_close(logits.data() + r * e.vocab, logits.data(), e.vocab, 1e-6));
}

// The engine marks each decode step as repeatable (what a GPU backend records as a CUDA graph):
// one begin/end pair per decode, a key that names the batch size and changes when reserve()
// reallocates, no download inside the step, and the recordings forgotten when buffers go.
class RecordingBackend : public cpu::CpuBackend {
 public:
  RecordingBackend() : cpu::CpuBackend(1) {}
  void begin_repeatable(const std::string& key) override {
    EXPECT_FALSE(in_step) << "nested step";
    in_step = true;
    keys.push_back(key);
  }
  void end_repeatable() override {
    EXPECT_TRUE(in_step);
    in_step = false;
    ++ended;
  }
  void abort_repeatable() override {
    in_step = false;
    ++aborted;
  }
  void forget_repeatables() override { ++forgotten; }
  void download(float* host_dst, const float* src, size_t n) override {
    EXPECT_FALSE(in_step) << "download inside a repeatable step";
    cpu::CpuBackend::download(host_dst, src, n);
  }
  std::vector<std::string> keys;
  bool in_step = false;
  int ended = 0, aborted = 0, forgotten = 0;
};

TEST(EngineRows, DecodeStepsAreRepeatable) {
  const std::string dir = test::engine_fixtures() + "/gpt2";
  const auto e = test::load_expected(dir);
  RecordingBackend be;
  dist::SingleRank comm;
  auto w = ModelWeights::load(dir + "/1-gpu", 0, 1, be);
  std::vector<float> logits(3 * e.vocab);
  {
    Engine eng(w, be, comm);
    eng.reserve(3, 32, 16);
    eng.prefill({e.prompts[0], e.prompts[1]}, {0, 1}, logits.data());
    EXPECT_TRUE(be.keys.empty()) << "prefill is not a repeated step";
    eng.decode({5, 6}, {0, 1}, logits.data());
    eng.decode({5, 6}, {0, 1}, logits.data());
    eng.decode({5}, {1}, logits.data());
    ASSERT_EQ(be.keys.size(), 3u);
    EXPECT_EQ(be.ended, 3);
    EXPECT_EQ(be.keys[0], be.keys[1]);
    EXPECT_NE(be.keys[2], be.keys[0]);  // another batch size
    const int forgotten = be.forgotten;
    eng.reserve(4, 40, 16);  // new buffers
    EXPECT_GT(be.forgotten, forgotten);
    eng.prefill({e.prompts[0], e.prompts[1]}, {0, 1}, logits.data());
    eng.decode({5, 6}, {0, 1}, logits.data());
    EXPECT_NE(be.keys.back(), be.keys[0]) << "the key must change with the buffers";
  }
  EXPECT_FALSE(be.in_step);
  EXPECT_EQ(be.aborted, 0);
  // A step left by an exception is aborted, not left open.
  try {
    ops::RepeatableStep step(be, "failing");
    throw Error("an op failed");
  } catch (const Error&) {
  }
  EXPECT_FALSE(be.in_step);
  EXPECT_EQ(be.aborted, 1);
}

}  // namespace
}  // namespace ftx
