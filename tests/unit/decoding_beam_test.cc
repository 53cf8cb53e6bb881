// Beam search (docs/runtime.md#beam-search): candidate expansion, length penalty, diversity, finished beams.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lib/decoding/beam_search.h"
#include "unit/decoding_test_helpers.h"

namespace ftx {
namespace {

using testing::hashed_logits;
using testing::log_softmax;
using testing::make_request;
using testing::run_decoder;

SamplingConfig beam_config(int64_t width, double len_penalty = 0.0, double diversity = 0.0) {
  SamplingConfig s;
  s.beam_width = width;
  s.len_penalty = len_penalty;
  s.beam_search_diversity_rate = diversity;
  s.return_log_probs = true;
  return s;
}

// Logits whose softmax is exactly `probs` (up to float rounding).
void set_probs(float* l, const std::vector<double>& probs) {
  for (size_t i = 0; i < probs.size(); ++i) l[i] = static_cast<float>(std::log(probs[i]));
}

TEST(DecodingBeam, WidthOneSelectionIsGreedy) {
  const int64_t vocab = 100;
  decoding::SamplingWorkspace ws;
  std::vector<float> l(vocab);
  for (int i = 0; i < 20; ++i) {
    hashed_logits(static_cast<uint64_t>(i), {i}, l.data(), vocab);
    const auto chosen = decoding::select_beams(l.data(), vocab, {{-1.5, 4, false}}, 1.0, 0.0, 0, ws);
    ASSERT_EQ(chosen.size(), 1u);
    EXPECT_EQ(chosen[0].token, std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(chosen[0].parent, 0);
  }
  // And a beam_width 1 request decodes exactly like greedy.
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* out) { hashed_logits(3, h, out, vocab); };
  const auto greedy = run_decoder({make_request({1, 2}, 10)}, vocab, fn);
  const auto beam1 = run_decoder({make_request({1, 2}, 10, beam_config(1, 1.0))}, vocab, fn);
  EXPECT_EQ(beam1.results[0].beams[0].output_ids, greedy.results[0].beams[0].output_ids);
}

TEST(DecodingBeam, FirstStepExpandsOnlyBeamZero) {
  const int64_t vocab = 10;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>&, float* l) {
    set_probs(l, {0.02, 0.3, 0.02, 0.25, 0.02, 0.2, 0.1, 0.03, 0.03, 0.03});
  };
  const auto run = run_decoder({make_request({0}, 1, beam_config(3))}, vocab, fn);
  const StepOutput& first = run.steps[0];
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{1, 3, 5}));  // distinct: the 3 best of the shared prompt
  EXPECT_EQ(first.parents, (std::vector<int32_t>{0, 0, 0}));
  ASSERT_EQ(run.results[0].beams.size(), 3u);
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(run.results[0].beams[2].output_ids, (std::vector<int32_t>{5}));
}

// Prompt of 3 tokens, end_id 4. Step 1: end_id (p .6) or token 1 (p .37). After a 1, token 2 has
// p .95. Hypotheses: A = [4] (cum ln .6, FT length 3: prompt + tokens before the end_id) and
// B = [1, 2] (cum ln .37 + ln .95, length 4: prompt + 1 token before the candidate).
constexpr int32_t kEnd = 4;
testing::LogitsFn two_hypotheses(std::vector<std::vector<float>>* seen = nullptr) {
  return [seen](int64_t, int64_t, const std::vector<int32_t>& h, float* l) {
    if (h.size() == 3) {
      set_probs(l, {0.01, 0.37, 0.01, 0.01, 0.6});
    } else {
      set_probs(l, {0.0125, 0.0125, 0.95, 0.0125, 0.0125});
    }
    if (seen) seen->emplace_back(l, l + 5);
  };
}

TEST(DecodingBeam, LengthPenaltyFlipsShortVersusLongHypothesis) {
  const double cum_a = std::log(0.6);
  const double cum_b = std::log(0.37) + std::log(0.95);
  for (double lp : {0.0, 3.0}) {
    SamplingConfig s = beam_config(2, lp);
    s.end_id = kEnd;
    const auto run = run_decoder({make_request({0, 0, 0}, 2, s)}, 5, two_hypotheses());
    const auto& beams = run.results[0].beams;
    ASSERT_EQ(beams.size(), 2u);
    const double score_a = cum_a / std::pow(3.0, lp);
    const double score_b = cum_b / std::pow(4.0, lp);
    const bool a_first = score_a > score_b;
    EXPECT_EQ(a_first, lp == 0.0) << "lp=" << lp;  // the case is built so the formula flips
    const BeamResult& a = a_first ? beams[0] : beams[1];
    const BeamResult& b = a_first ? beams[1] : beams[0];
    EXPECT_EQ(a.output_ids, (std::vector<int32_t>{kEnd}));
    EXPECT_EQ(a.finish_reason, FinishReason::kEndId);
    EXPECT_EQ(b.output_ids, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(b.finish_reason, FinishReason::kLength);
    EXPECT_NEAR(a.cum_log_prob, cum_a, 1e-6);  // stored cum stays raw (no penalty)
    EXPECT_NEAR(b.cum_log_prob, cum_b, 1e-6);
  }
}

TEST(DecodingBeam, LengthPenaltyFormula) {
  EXPECT_EQ(decoding::length_penalised_score(-2.0, 4, 0.0), -2.0);
  EXPECT_EQ(decoding::length_penalised_score(-2.0, 1, 2.0), -2.0);
  EXPECT_DOUBLE_EQ(decoding::length_penalised_score(-2.0, 4, 0.5), -1.0);
  EXPECT_DOUBLE_EQ(decoding::length_penalised_score(-2.0, 3, 2.0), -2.0 / 9.0);
}

TEST(DecodingBeam, FinishedBeamEmitsOnlyEndIdAndKeepsItsScore) {
  SamplingConfig s = beam_config(2);
  s.end_id = kEnd;
  std::vector<std::vector<float>> seen;
  const auto run = run_decoder({make_request({0, 0, 0}, 4, s)}, 5, two_hypotheses(&seen));
  ASSERT_EQ(run.steps_taken, 4);
  for (int64_t t = 1; t < 4; ++t) {
    // Slot 0 holds A (best): it continues itself with end_id.
    EXPECT_EQ(run.steps[t].tokens[0], kEnd);
    EXPECT_EQ(run.steps[t].parents[0], 0);
    EXPECT_TRUE(run.steps[t].finished[0]);
  }
  const BeamResult& a = run.results[0].beams[0];
  EXPECT_EQ(a.output_ids, (std::vector<int32_t>{kEnd}));
  EXPECT_NEAR(a.cum_log_prob, std::log(0.6), 1e-6);
  ASSERT_EQ(a.output_log_probs.size(), 1u);
  const BeamResult& b = run.results[0].beams[1];
  EXPECT_EQ(b.output_ids, (std::vector<int32_t>{1, 2, 2, 2}));
  // Per-step log-softmax of each chosen token, computed independently from the logits fed in.
  const std::vector<double> first = log_softmax(seen[0].data(), 5);
  const std::vector<double> later = log_softmax(seen[3].data(), 5);  // a row after token 1
  EXPECT_NEAR(a.output_log_probs[0], first[kEnd], 1e-6);
  ASSERT_EQ(b.output_log_probs.size(), 4u);
  EXPECT_NEAR(b.output_log_probs[0], first[1], 1e-6);
  double cum = first[1];
  for (int t = 1; t < 4; ++t) {
    EXPECT_NEAR(b.output_log_probs[t], later[2], 1e-6);
    cum += later[2];
  }
  EXPECT_NEAR(b.cum_log_prob, cum, 1e-6);
}

TEST(DecodingBeam, DiversityRatePenalisesLowerRankedSiblings) {
  // Step 1 gives beams X = [1] (p .5) and Y = [2] (p .45). Step 2: X's two best continuations
  // (3: .6, 4: .39) beat Y's best (5: .3) on raw cum; with diversity -1 X's second candidate
  // (rank 1, index mod K = 1) loses 1 and Y's best wins a slot.
  const int64_t vocab = 6;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) {
    if (h.size() == 1) {
      set_probs(l, {0.0125, 0.5, 0.45, 0.0125, 0.0125, 0.0125});
    } else if (h.back() == 1) {
      set_probs(l, {0.0025, 0.0025, 0.0025, 0.6, 0.39, 0.0025});
    } else {
      set_probs(l, {0.14, 0.14, 0.14, 0.14, 0.14, 0.3});
    }
  };
  const auto plain = run_decoder({make_request({0}, 2, beam_config(2))}, vocab, fn);
  EXPECT_EQ(plain.steps[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(plain.steps[1].parents, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(plain.steps[1].tokens, (std::vector<int32_t>{3, 4}));
  const auto diverse = run_decoder({make_request({0}, 2, beam_config(2, 0.0, -1.0))}, vocab, fn);
  EXPECT_EQ(diverse.steps[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(diverse.steps[1].parents, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(diverse.steps[1].tokens, (std::vector<int32_t>{3, 5}));
  std::vector<std::vector<int32_t>> outs;
  for (const auto& b : diverse.results[0].beams) outs.push_back(b.output_ids);
  EXPECT_EQ(outs, (std::vector<std::vector<int32_t>>{{1, 3}, {2, 5}}));
}

TEST(DecodingBeam, RequestDecodesTheSameAloneOrInABatch) {
  const int64_t vocab = 30;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) { hashed_logits(17, h, l, vocab, 1.5); };
  SamplingConfig s = beam_config(3, 1.0);
  s.end_id = 0;
  const DecodeRequest req = make_request({5, 6, 7}, 8, s);
  const auto alone = run_decoder({req}, vocab, fn);
  const auto batched = run_decoder({make_request({1}, 4, s), make_request({2, 3}, 12, s), req}, vocab, fn);
  ASSERT_EQ(batched.results[2].beams.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(batched.results[2].beams[k].output_ids, alone.results[0].beams[k].output_ids);
    EXPECT_EQ(batched.results[2].beams[k].cum_log_prob, alone.results[0].beams[k].cum_log_prob);
  }
}

TEST(DecodingBeam, ParentsReorderHistoriesForPenaltiesAndStopWords) {
  // A stop word completed on a beam's own (reordered) history finishes that beam.
  const int64_t vocab = 8;
  SamplingConfig s = beam_config(2);
  s.stop_words = {{3, 6}};
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) {
    if (h.size() == 1) {
      set_probs(l, {0.01, 0.01, 0.01, 0.5, 0.4, 0.01, 0.05, 0.01});
    } else {
      set_probs(l, {0.01, 0.01, 0.01, 0.01, 0.01, 0.3, 0.64, 0.01});
    }
  };
  const auto run = run_decoder({make_request({0}, 3, s)}, vocab, fn);
  bool found = false;
  for (const auto& b : run.results[0].beams) {
    if (b.output_ids == std::vector<int32_t>{3, 6}) {
      found = true;
      EXPECT_EQ(b.finish_reason, FinishReason::kStopWords);
    } else {
      EXPECT_NE(b.finish_reason, FinishReason::kStopWords);
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace ftx
