// GPT-J, GPT-NeoX, BLOOM, OPT and XGLM (issue 5): the layout tables and derived tensors of the HF
// converter, and the engine on converted fixture models.
//
// ArchEngine.LogitsMatchReference runs only when FTX_ARCH_MODELS names fixture folders (made by
// scripts/fixtures/make_arch_fixtures.py and converted by tests/e2e/hf/arch_test.py, which runs this
// binary once alone and once under `mpirun -np 2`): with N ranks it loads <dir>/ft/<N>-gpu and
// checks the logits along the float64 reference's greedy paths to 1e-4 of the row's largest logit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "engine_test_util.h"
#include "formats/error.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/layout_table.h"
#include "lib/ops/backend.h"
#include "lib/ops/host_math.h"

namespace ftx {
namespace {

std::vector<float> values(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data(), v.size() * sizeof(float));
  return v;
}

TEST(ArchLayout, GptjSeparateProjectionsAreQkvParts) {
  auto m = match_layout(hf_gptj_layout(), "h.3.attn.k_proj.weight", "t");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->ft_name, "model.layers.3.attention.query_key_value.weight");
  EXPECT_EQ(m->rule->part, 1);
  EXPECT_TRUE(m->rule->transpose);
  EXPECT_FALSE(match_layout(hf_gptj_layout(), "h.0.attn.masked_bias", "t"));
  m = match_layout(hf_gptj_layout(), "lm_head.bias", "t");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->ft_name, "model.lm_head.bias");
}

TEST(ArchLayout, NamesOfEachArchitecture) {
  struct Case {
    const ArchLayout& l;
    const char* src;
    const char* ft;
  };
  const Case cases[] = {
      {hf_gpt_neox_layout(), "layers.1.attention.query_key_value.bias", "model.layers.1.attention.query_key_value.bias"},
      {hf_gpt_neox_layout(), "embed_out.weight", "model.lm_head.weight"},
      {hf_bloom_layout(), "word_embeddings_layernorm.weight", "model.pre_decoder_layernorm.weight"},
      {hf_bloom_layout(), "h.0.self_attention.dense.weight", "model.layers.0.attention.dense.weight"},
      {hf_opt_layout(), "layers.2.final_layer_norm.bias", "model.layers.2.post_attention_layernorm.bias"},
      {hf_opt_layout(), "final_layer_norm.weight", "model.final_layernorm.weight"},
      {hf_opt_layout(), "layers.0.fc2.weight", "model.layers.0.mlp.dense_4h_to_h.weight"},
      {hf_xglm_layout(), "layer_norm.bias", "model.final_layernorm.bias"},
      {hf_xglm_layout(), "layers.1.self_attn_layer_norm.weight", "model.layers.1.input_layernorm.weight"},
  };
  for (const auto& c : cases) {
    auto m = match_layout(c.l, c.src, "t");
    ASSERT_TRUE(m) << c.src;
    EXPECT_EQ(m->ft_name, c.ft) << c.src;
  }
  EXPECT_FALSE(match_layout(hf_xglm_layout(), "embed_positions.weights", "t"));
  EXPECT_THROW(match_layout(hf_opt_layout(), "layers.0.adapter.weight", "t"), Error);
}

TEST(ArchLayout, ModelTypeAliases) {
  auto family = [](const std::string& t) {
    const hf::HfFamily* f = hf::find_family(t);
    return f ? f->model_type : std::string();
  };
  EXPECT_EQ(family("gpt-j"), "gptj");
  EXPECT_EQ(family("GPTNeoX"), "gpt_neox");
  EXPECT_EQ(family("gpt-neox"), "gpt_neox");
  EXPECT_EQ(family("xglm"), "xglm");
  EXPECT_EQ(family("llama"), "llama");
  EXPECT_EQ(family("gemma"), "");
}

TEST(DerivedTensor, MatmulTransposedAndNot) {
  auto a = owned_tensor({1, 2, 3, 4, 5, 6}, {2, 3}, "a");     // [2,3]
  auto b = owned_tensor({1, 0, 2, 0, 1, 1}, {3, 2}, "b");     // [3,2]
  EXPECT_EQ(values(matmul_tensor(a, b, false, "ab")), (std::vector<float>{8, 3, 20, 6}));
  auto bt = owned_tensor({1, 2, 1, 0, 0, 1}, {2, 3}, "bt");   // the transpose of b
  EXPECT_EQ(values(matmul_tensor(a, bt, true, "abt")), (std::vector<float>{8, 3, 20, 6}));
  EXPECT_THROW(matmul_tensor(a, a, false, "bad"), Error);
}

TEST(DerivedTensor, DividedSumRoundsLikeNumpyHalf) {
  // 1 + 2^-11 is not an fp16 value: FT's astype(float16) rounds it to 1 before dividing.
  const float x = 1.0f + std::ldexp(1.0f, -11);
  auto a = owned_tensor({x}, {1}, "a");
  auto b = owned_tensor({3.0f}, {1}, "b");
  EXPECT_EQ(values(ft_divided_sum({a, b}, 2, DType::kFloat16, "s"))[0], 0.5f + 1.5f);
  EXPECT_EQ(values(ft_divided_sum({a, b}, 2, DType::kFloat32, "s"))[0], x / 2 + 1.5f);
  EXPECT_EQ(values(ft_divided_sum({a, b}, 1, DType::kFloat32, "s"))[0], x + 3.0f);
}

TEST(DerivedTensor, SinusoidalTableIsFairseqs) {
  const int64_t H = 8;
  auto t = values(sinusoidal_table(2, 3, H, "wpe"));  // rows for positions 2, 3, 4
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 0; i < H / 2; ++i) {
      const double f = std::exp(-static_cast<double>(i) * std::log(10000.0) / (H / 2 - 1));
      EXPECT_FLOAT_EQ(t[r * H + i], static_cast<float>(std::sin((r + 2) * f)));
      EXPECT_FLOAT_EQ(t[r * H + H / 2 + i], static_cast<float>(std::cos((r + 2) * f)));
    }
}

TEST(Alibi, SlopesForSixHeadsSplitOverTwoRanks) {
  // HF build_alibi_tensor for 6 heads: 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3 (every other of 8).
  const auto s = ops::alibi_slopes(6);
  const double want[] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  for (int h = 0; h < 6; ++h) EXPECT_DOUBLE_EQ(s[h], want[h]) << h;
}

TEST(ArchEngine, LogitsMatchReference) {
  const char* env = std::getenv("FTX_ARCH_MODELS");
  if (!env || !*env) GTEST_SKIP() << "FTX_ARCH_MODELS not set (tests/e2e/hf/arch_test.py sets it)";
  const auto comm = test::this_process_communicator();
  std::stringstream ss(env);
  std::string dir;
  while (std::getline(ss, dir, ',')) {
    SCOPED_TRACE(dir);
    const auto e = test::load_expected(dir);
    const auto o = test::run_greedy_paths(dir + "/ft/" + std::to_string(comm->size()) + "-gpu", e, *comm);
    if (comm->rank() != 0) continue;
    ASSERT_EQ(o.steps.size(), e.prompts.size());
    for (size_t b = 0; b < e.prompts.size(); ++b) {
      ASSERT_EQ(o.steps[b].size(), e.greedy_logits[b].size());
      for (size_t s = 0; s < o.steps[b].size(); ++s)
        EXPECT_TRUE(test::logits_close(o.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, 1e-4))
            << "tp " << comm->size() << " prompt " << b << " step " << s;
    }
  }
}

}  // namespace
}  // namespace ftx
