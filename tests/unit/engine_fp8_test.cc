// FP8 (`--fp8`, `--fp8-kv-cache`) in the CPU engine against the float64 emulation of the same
// arithmetic (tests/reference/fp8_reference.py) on `ftx smoothquant --fp8` folders of the engine
// fixtures (scripts/fixtures/make_fp8_fixtures.py): GPT-2, GPT-J, GPT-NeoX, BLOOM, OPT post-LN and
// NeMo GPT-Next (SwiGLU: the gate projection is an FP8 GEMM too), SantaCoder (multi-query), and
// (the D9 cases) the Llama and Qwen2 checkpoints of tests/fixtures/hf5 converted by convert-hf
// (grouped-query attention: 2 of 4 KV heads, one per rank at TP 2; SwiGLU, RMSNorm) and its Mistral
// without the sliding window (multi-query: the one KV head whole on both ranks); FP8 layer GEMMs,
// the FP8 KV cache, and both. Under `mpirun -np 2` (tests/e2e/quant/fp8.cmake) the TP-2 folders. The engine's GEMM inputs and the K and V it stores are traced and the emulation rerun on
// them (tests/reference/fp8_follow.py), so that a value the two round to neighbouring E4M3 codes (an
// fp32 and a float64 value on either side of a boundary) does not move every later logit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "engine_test_util.h"
#include "follow_test_util.h"
#include "fp8_test_util.h"
#include "formats/error.h"

namespace ftx {
namespace {

const std::vector<std::string>& fp8_models() {
  static const std::vector<std::string> names = {"gpt2", "gptj", "gptneox", "bloom", "opt_post", "gptnext", "santacoder"};
  return names;
}
// The Llama family's grouped-query and multi-query QKV (user trial D9: the docs said FP8 refused
// grouped-query attention while smoothquant --fp8 wrote it).
const std::vector<std::string>& fp8_kv_head_models() {
  static const std::vector<std::string> names = {"llama", "qwen2", "mistral_mqa"};
  return names;
}
const auto kModes = ::testing::Values("fp8", "fp8_kv", "fp8_both");

using test::fp8_fixtures;

QuantPolicy policy_of(const std::string& mode) {
  QuantPolicy quant;
  quant.fp8 = mode != "fp8_kv";
  quant.fp8_kv_cache = mode != "fp8";
  return quant;
}

// A CPU backend that records the fp32 input of every FP8 GEMM (named by layer and GEMM) and the K
// and V rows every attention call stores (named by layer), so that the emulation can follow the
// engine's rounding (tests/reference/fp8_follow.py).
class Fp8TracingBackend : public cpu::CpuBackend {
 public:
  Fp8TracingBackend() : cpu::CpuBackend(0) {}  // OMP_NUM_THREADS (ctest sets 2; under mpirun 1 per rank)

  void name_layers(const ModelWeights& w) {
    layers_ = static_cast<int64_t>(w.layers.size());
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const std::string p = std::to_string(l);
      names_[&w.layers[l].qkv_w] = p + ".qkv";
      names_[&w.layers[l].dense_w] = p + ".dense";
      names_[&w.layers[l].fc_w] = p + ".fc1";
      names_[&w.layers[l].gate_w] = p + ".gate";
      names_[&w.layers[l].proj_w] = p + ".fc2";
    }
  }
  void at_prompt(int64_t prompt) { prompt_ = prompt; }

  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override {
    if (B.dtype == DType::kFloat8E4M3) {
      const auto it = names_.find(&B);
      if (it == names_.end()) throw Error("engine_fp8_test", "an FP8 GEMM on a weight that is not a layer GEMM");
      record("gemm", it->second, A.fp32(), M, K, K, 0);
    }
    cpu::CpuBackend::gemm(M, N, K, A, B, trans_b, C, beta);
  }
  void context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                         const ops::BlockTables& tables, const ops::KvCache& k, const ops::KvCache& v,
                         const ops::AttentionShape& sh, const int32_t* past) override {
    if (k.dtype == DType::kFloat8E4M3) {
      if (B != 1) throw Error("engine_fp8_test", "traced prefills run one prompt at a time");
      record_kv(qkv.fp32(), lengths[0], sh);
    }
    cpu::CpuBackend::context_attention(out, qkv, B, S, lengths, tables, k, v, sh, past);
  }
  void decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables, const int32_t* past,
                        const ops::KvCache& k, const ops::KvCache& v, const ops::AttentionShape& sh) override {
    if (k.dtype == DType::kFloat8E4M3) record_kv(qkv.fp32(), n, sh);
    cpu::CpuBackend::decode_attention(out, qkv, n, tables, past, k, v, sh);
  }

  void write(const std::string& dir, int rank) const {
    nlohmann::json calls = nlohmann::json::array();
    for (const Call& c : calls_)
      calls.push_back({{"prompt", c.prompt}, {"kind", c.kind}, {"name", c.name}, {"rows", c.rows}, {"cols", c.cols},
                       {"offset", c.offset}});
    std::ofstream(dir + "/index." + std::to_string(rank) + ".json") << nlohmann::json{{"calls", calls}}.dump();
    std::ofstream data(dir + "/data." + std::to_string(rank) + ".bin", std::ios::binary);
    data.write(reinterpret_cast<const char*>(values_.data()), static_cast<std::streamsize>(values_.size() * 4));
    ASSERT_TRUE(data.good()) << dir << ": writing the trace failed";
  }

 private:
  struct Call {
    int64_t prompt;
    std::string kind, name;
    int64_t rows, cols;
    size_t offset;
  };
  // rows × cols values of a row-major array with row stride `ld`, from column `first`.
  void record(const std::string& kind, const std::string& name, const float* a, int64_t rows, int64_t cols, int64_t ld,
              int64_t first) {
    calls_.push_back({prompt_, kind, name, rows, cols, values_.size()});
    for (int64_t r = 0; r < rows; ++r) values_.insert(values_.end(), a + r * ld + first, a + r * ld + first + cols);
  }
  // The K and V parts of `rows` fused qkv rows; the n-th attention call of a step is layer n.
  void record_kv(const float* qkv, int64_t rows, const ops::AttentionShape& sh) {
    const std::string layer = std::to_string(attention_calls_++ % layers_);
    const int64_t kv = sh.kv_heads * sh.head_dim;
    record("k", layer, qkv, rows, kv, sh.qkv_width(), sh.q_heads * sh.head_dim);
    record("v", layer, qkv, rows, kv, sh.qkv_width(), sh.q_heads * sh.head_dim + kv);
  }

  std::map<const ops::Weight*, std::string> names_;
  std::vector<Call> calls_;
  std::vector<float> values_;
  int64_t prompt_ = 0, layers_ = 1;
  size_t attention_calls_ = 0;
};

// Logits within 1e-4 × the row's largest |logit| of the float64 emulation on every step, once the
// emulation takes the engine's rounding where a value lies within the fp32 error of an E4M3
// boundary (fp8_follow.py asserts every value the engine quantised equals its own within that
// error and counts those it followed); and every step's greedy token is the unfollowed emulation's.
void expect_matches(const std::string& model, const std::string& mode, int tp, const test::Observed& o,
                    const test::Expected& e, const std::string& trace) {
  const std::string src = test::env_or("FTX_SOURCE_DIR", test::source_dir_from_here());
  const std::string fixture = fp8_fixtures() + "/" + model;
  const std::string out = trace + "/followed.json";
  const std::string cmd = test::env_or("FTX_TEST_PYTHON", "python3") + " " + src +
                          "/tests/reference/fp8_follow.py --model " + model + " --folder " + fixture +
                          "/1-gpu --mode " + mode + " --tp " + std::to_string(tp) + " --expected " + fixture +
                          "/expected.json --trace " + trace + " --out " + out;
  const double worst = test::expect_followed(cmd, out, o, e);
  std::printf("  %s %s TP %d: largest |logit - emulation| %.2e of the row's largest (tolerance 1e-4)\n", model.c_str(),
              mode.c_str(), tp, worst);
}

test::Observed run_fp8(const std::string& dir, const test::Expected& e, dist::Communicator& comm,
                       Fp8TracingBackend& be, const std::string& mode) {
  return test::run_prompts_alone(
      dir, e, comm, be, policy_of(mode), [&](const ModelWeights& w) { be.name_layers(w); },
      [&](int64_t prompt, int64_t) { be.at_prompt(prompt); });
}

class EngineFp8 : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EngineFp8, MatchesEmulation) {
  if (dist::launched_by_mpi()) GTEST_SKIP() << "the TP-1 case runs without mpirun";
  const auto& [model, mode] = GetParam();
  const std::string dir = fp8_fixtures() + "/" + model;
  const auto e = test::load_expected(dir, mode);
  ASSERT_FALSE(e.prompts.empty());
  dist::SingleRank comm;
  Fp8TracingBackend be;
  const auto o = run_fp8(dir + "/1-gpu", e, comm, be, mode);
  const std::string trace = test::trace_dir(comm, "fp8");
  be.write(trace, 0);
  expect_matches(model, mode, 1, o, e, trace);
  std::filesystem::remove_all(trace);
  EXPECT_GT(test::largest_prompt_difference(e, test::load_expected(dir, "float")), 1e-3)
      << "FP8 and floating-point references agree: the test would not see a missing quantisation";
}

TEST_P(EngineFp8, TwoRanksMatchEmulation) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const auto& [model, mode] = GetParam();
  const std::string dir = fp8_fixtures() + "/" + model;
  const auto e = test::load_expected(dir, mode);
  ASSERT_FALSE(e.prompts.empty());
  Fp8TracingBackend be;
  const auto o = run_fp8(dir + "/2-gpu", e, *comm, be, mode);
  const std::string trace = test::trace_dir(*comm, "fp8");
  be.write(trace, comm->rank());
  comm->barrier();
  if (comm->rank() == 0) {
    expect_matches(model, mode, 2, o, e, trace);
    std::filesystem::remove_all(trace);
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param);
}
INSTANTIATE_TEST_SUITE_P(Models, EngineFp8, ::testing::Combine(::testing::ValuesIn(fp8_models()), kModes), case_name);
INSTANTIATE_TEST_SUITE_P(D9_KvHeads, EngineFp8, ::testing::Combine(::testing::ValuesIn(fp8_kv_head_models()), kModes),
                         case_name);

// The D9 fixtures are what they stand for: grouped-query (2 KV heads of 4, one per rank at TP 2)
// and multi-query (1 KV head, on both ranks), each rank's QKV held as E4M3.
TEST(EngineFp8Weights, D9_GroupedAndMultiQueryKvHeads) {
  if (dist::launched_by_mpi()) GTEST_SKIP();
  for (const auto& [model, kv_heads] : {std::pair<std::string, int64_t>{"llama", 2}, {"mistral_mqa", 1}}) {
    cpu::CpuBackend be(1);
    for (int rank = 0; rank < 2; ++rank) {
      auto w = ModelWeights::load(fp8_fixtures() + "/" + model + "/2-gpu", rank, 2, be, policy_of("fp8"));
      EXPECT_EQ(w.config().head_num, 4) << model;
      EXPECT_EQ(w.config().kv_head_num, kv_heads) << model;
      EXPECT_EQ(w.config().kv_heads_per_rank(2), 1) << model;
      EXPECT_EQ(w.layers[0].qkv_w.dtype, DType::kFloat8E4M3) << model;
    }
  }
}

// The layer GEMMs are held as E4M3 with their two per-tensor scales; embeddings stay fp32; the KV
// cache is E4M3 with each layer's scale.
TEST(EngineFp8Weights, LayerGemmsHeldAsE4M3) {
  if (dist::launched_by_mpi()) GTEST_SKIP();
  const std::string dir = fp8_fixtures() + "/gpt2/1-gpu";
  cpu::CpuBackend be(1);
  auto w = ModelWeights::load(dir, 0, 1, be, policy_of("fp8_both"));
  for (const ops::Weight* m : {&w.layers[0].qkv_w, &w.layers[0].dense_w, &w.layers[0].fc_w, &w.layers[0].proj_w}) {
    EXPECT_EQ(m->dtype, DType::kFloat8E4M3);
    EXPECT_GT(m->activation_scaling_factor, 0.0f);
    EXPECT_GT(m->weights_scaling_factor, 0.0f);
  }
  EXPECT_EQ(w.wte.dtype, DType::kFloat32);
  EXPECT_EQ(w.kv_dtype(), DType::kFloat8E4M3);
  EXPECT_GT(w.layers[1].kv_scale, 0.0f);
}

}  // namespace
}  // namespace ftx
