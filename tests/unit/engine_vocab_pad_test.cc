// Vocabulary padding of the logits GEMM (FT pads the vocabulary to a multiple of 8 for half
// precision; the CUDA backend asks for it through Backend::vocab_pad_multiple). A CPU backend that
// asks for the same padding must give the logits of the unpadded run, along the float64
// reference's greedy paths, on fixtures whose vocabularies (300, 301) are not multiples of 8: tied
// tables (GPT-2, BLOOM, OPT), an untied lm_head (NeoX) and an lm_head bias (GPT-J).
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace ftx {
namespace {

class PaddingCpuBackend : public cpu::CpuBackend {
 public:
  PaddingCpuBackend() : cpu::CpuBackend(0) {}
  int64_t vocab_pad_multiple() const override { return 8; }
};

class EngineVocabPad : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineVocabPad, PaddedLogitsEqualUnpadded) {
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  dist::SingleRank comm;
  PaddingCpuBackend padded_be;
  {
    ModelWeights w = ModelWeights::load(dir + "/1-gpu", 0, 1, padded_be);
    const int64_t V = w.config().vocab_size, Vp = w.padded_vocab(), H = w.config().hidden();
    ASSERT_NE(V % 8, 0) << "the fixture's vocabulary needs no padding, so the test would prove nothing";
    EXPECT_EQ(Vp, (V + 7) / 8 * 8);
    // The padding rows of the lm_head table are zero, so their logits are the bias's zero padding.
    const float* table = w.lm_head_w.fp32();
    for (int64_t i = V * H; i < Vp * H; ++i) ASSERT_EQ(table[i], 0.0f) << "lm_head element " << i;
    if (w.lm_head_b)
      for (int64_t i = V; i < Vp; ++i) ASSERT_EQ(w.lm_head_b[i], 0.0f) << "lm_head bias element " << i;
  }
  const auto padded = test::run_greedy_paths_on(padded_be, dir + "/1-gpu", e, comm);
  const auto plain = test::run_greedy_paths(dir + "/1-gpu", e, comm);
  ASSERT_EQ(padded.steps.size(), plain.steps.size());
  for (size_t b = 0; b < plain.steps.size(); ++b) {
    ASSERT_EQ(padded.steps[b].size(), plain.steps[b].size());
    for (size_t s = 0; s < plain.steps[b].size(); ++s) {
      ASSERT_EQ(padded.steps[b][s].size(), static_cast<size_t>(e.vocab));
      // The same products summed in the same order: equal up to the GEMM's blocking of N.
      EXPECT_TRUE(test::logits_close(padded.steps[b][s].data(), plain.steps[b][s].data(), e.vocab, 1e-6))
          << "prompt " << b << " step " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineVocabPad, ::testing::Values("gpt2", "gptj", "gptneox", "bloom", "opt_post"));

}  // namespace
}  // namespace ftx
