// Decoder stop criteria, forcing and results (docs/runtime.md#stopping-lengths-and-sessions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "formats/error.h"
#include "unit/decoding_test_helpers.h"

namespace ftx {
namespace {

using testing::make_request;
using testing::run_decoder;

// Logits that make `want(step)` the argmax by a wide margin, with end_id next best.
testing::LogitsFn scripted(std::function<int32_t(int64_t)> want, int32_t runner_up, int64_t vocab) {
  return [=](int64_t step, int64_t, const std::vector<int32_t>&, float* l) {
    std::fill(l, l + vocab, 0.0f);
    l[runner_up] = 5.0f;
    l[want(step)] = 10.0f;
  };
}

TEST(DecodingDecoder, EndIdFinishesWithReasonEndIdAndIsKept) {
  SamplingConfig s;
  s.end_id = 2;
  const int64_t vocab = 6;
  auto fn = scripted([](int64_t step) { return step < 3 ? 4 : 2; }, 1, vocab);
  const auto run = run_decoder({make_request({5}, 10, s)}, vocab, fn);
  const BeamResult& r = run.results[0].beams[0];
  EXPECT_EQ(r.output_ids, (std::vector<int32_t>{4, 4, 4, 2}));
  EXPECT_EQ(r.finish_reason, FinishReason::kEndId);
  EXPECT_STREQ(finish_reason_name(r.finish_reason), "end_id");
  EXPECT_EQ(run.steps_taken, 4);
  EXPECT_TRUE(run.steps.back().finished[0]);
}

TEST(DecodingDecoder, MaxNewTokensFinishesWithReasonLength) {
  const int64_t vocab = 6;
  const auto run = run_decoder({make_request({5}, 3)}, vocab, scripted([](int64_t) { return 1; }, 0, vocab));
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(run.results[0].beams[0].finish_reason, FinishReason::kLength);
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
}

// FT runs a folder whose end_id lies outside the vocabulary: generation never stops on it, and a
// finished row is filled with id 0 rather than the impossible end_id.
TEST(DecodingDecoder, EndIdOutsideTheVocabularyNeverMatches) {
  SamplingConfig s;
  s.end_id = 50256;
  const int64_t vocab = 6;
  const auto run = run_decoder({make_request({5}, 3, s)}, vocab, scripted([](int64_t) { return 3; }, 0, vocab));
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{3, 3, 3}));
  EXPECT_EQ(run.results[0].beams[0].finish_reason, FinishReason::kLength);
}

// Temperature 0 is greedy decoding on the unscaled logits, whatever top_k/top_p say.
TEST(DecodingDecoder, TemperatureZeroIsGreedy) {
  const int64_t vocab = 6;
  SamplingConfig s;
  s.temperature = 0.0;
  s.top_k = 4;
  s.top_p = 0.9;
  s.seed = 7;
  s.return_log_probs = true;
  // Nearly flat logits: a draw among the top 4 would leave the argmax most of the time.
  auto flat = [&](int64_t step, int64_t, const std::vector<int32_t>&, float* l) {
    std::fill(l, l + vocab, 0.9f);
    l[step % 3] = 1.0f;
  };
  const auto run = run_decoder({make_request({5}, 8, s)}, vocab, flat);
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 1}));
  // cum_log_prob sums log softmax of the unscaled logits: 8 x log(e^1 / (e^1 + 5 e^0.9)).
  const double lp = 1.0 - std::log(std::exp(1.0) + 5 * std::exp(0.9));
  EXPECT_NEAR(run.results[0].beams[0].cum_log_prob, 8 * lp, 1e-5);
  SamplingConfig sampled = s;
  sampled.temperature = 1.0;
  const auto drawn = run_decoder({make_request({5}, 8, sampled)}, vocab, flat);
  EXPECT_NE(drawn.results[0].beams[0].output_ids, run.results[0].beams[0].output_ids);
}

// Slots come and go: a request added to a freed slot decodes exactly as it would alone.
TEST(DecodingDecoder, SlotsAreReusedWithoutCarryingState) {
  const int64_t vocab = 8;
  SamplingConfig s;
  s.top_k = 5;
  s.seed = 11;
  s.return_log_probs = true;
  std::vector<float> logits(2 * vocab);
  auto fill = [&](int64_t row, int64_t step) {
    for (int64_t v = 0; v < vocab; ++v) logits[row * vocab + v] = 0.1f * float((v * 7 + step * 3 + row) % vocab);
  };
  // Alone: slot 0 of a 1-slot decoder.
  Decoder alone(1, 1, vocab);
  alone.add(0, make_request({1, 2}, 3, s));
  for (int64_t step = 0; step < 3; ++step) {
    fill(0, step);
    alone.step(logits.data());
  }
  const RequestResult want = alone.take(0);
  // In slot 1 after another request used it, next to a different request in slot 0.
  Decoder d(2, 1, vocab);
  SamplingConfig other = s;
  other.seed = 99;
  d.add(1, make_request({3}, 1, other));
  fill(1, 0);
  d.step(logits.data());
  ASSERT_TRUE(d.slot_finished(1));
  d.take(1);
  EXPECT_FALSE(d.occupied(1));
  d.add(0, make_request({4, 4, 4}, 5, other));
  d.add(1, make_request({1, 2}, 3, s));
  for (int64_t step = 0; step < 3; ++step) {
    fill(0, step + 10);
    // The same logits as the lone run, in row 1.
    for (int64_t v = 0; v < vocab; ++v) logits[vocab + v] = 0.1f * float((v * 7 + step * 3) % vocab);
    d.step(logits.data());
  }
  ASSERT_TRUE(d.slot_finished(1));
  const RequestResult got = d.take(1);
  EXPECT_EQ(got.beams[0].output_ids, want.beams[0].output_ids);
  EXPECT_EQ(got.beams[0].output_log_probs, want.beams[0].output_log_probs);
  EXPECT_EQ(got.beams[0].cum_log_prob, want.beams[0].cum_log_prob);
  EXPECT_THROW(d.add(0, make_request({1}, 1, s)), Error);  // occupied
  EXPECT_THROW(d.take(1), Error);                          // free
}

TEST(DecodingDecoder, ZeroMaxNewTokensIsFinishedFromTheStart) {
  Decoder d({make_request({1}, 0)}, 4);
  EXPECT_TRUE(d.all_finished());
  EXPECT_TRUE(d.results()[0].beams[0].output_ids.empty());
}

TEST(DecodingDecoder, MinLengthBlocksEndIdExactlyUntilTheCount) {
  SamplingConfig s;
  s.end_id = 2;
  s.min_length = 3;
  const int64_t vocab = 6;
  // end_id is always the argmax; the runner-up (4) must be taken while fewer than 3 were generated.
  const auto run = run_decoder({make_request({5}, 10, s)}, vocab, scripted([](int64_t) { return 2; }, 4, vocab));
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{4, 4, 4, 2}));
  EXPECT_EQ(run.results[0].beams[0].finish_reason, FinishReason::kEndId);
}

TEST(DecodingDecoder, StopWordFinishesWithReasonStopWordsAndKeepsTokens) {
  SamplingConfig s;
  s.end_id = 0;
  s.stop_words = {{9, 9, 9}, {3, 4}};
  const int64_t vocab = 10;
  const std::vector<int32_t> script = {1, 3, 5, 3, 4, 6, 6};
  auto fn = scripted([&](int64_t step) { return script[step]; }, 8, vocab);
  const auto run = run_decoder({make_request({7}, 10, s)}, vocab, fn);
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{1, 3, 5, 3, 4}));
  EXPECT_EQ(run.results[0].beams[0].finish_reason, FinishReason::kStopWords);
  EXPECT_STREQ(finish_reason_name(FinishReason::kStopWords), "stop_words");
}

TEST(DecodingDecoder, StopWordMayStartInThePrompt) {
  SamplingConfig s;
  s.stop_words = {{7, 1}};
  const int64_t vocab = 10;
  const auto run = run_decoder({make_request({7}, 10, s)}, vocab, scripted([](int64_t) { return 1; }, 8, vocab));
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(run.results[0].beams[0].finish_reason, FinishReason::kStopWords);
}

TEST(DecodingDecoder, FinishedRowsAreForcedToEndIdWhileOthersContinue) {
  SamplingConfig s;
  s.end_id = 3;
  const int64_t vocab = 6;
  auto fn = [&](int64_t step, int64_t row, const std::vector<int32_t>&, float* l) {
    std::fill(l, l + vocab, 0.0f);
    l[row == 0 && step == 0 ? 3 : 5] = 10.0f;  // row 0 ends at once; row 1 never does
  };
  const auto run = run_decoder({make_request({1}, 4, s), make_request({1, 2}, 4, s)}, vocab, fn);
  ASSERT_EQ(run.steps_taken, 4);
  for (const StepOutput& out : run.steps) {
    EXPECT_EQ(out.tokens[0], 3);
    EXPECT_TRUE(out.finished[0]);
    EXPECT_EQ(out.parents[0], 0);
    EXPECT_EQ(out.parents[1], 1);
  }
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{3}));  // nothing after end_id
  EXPECT_EQ(run.results[1].beams[0].output_ids, (std::vector<int32_t>{5, 5, 5, 5}));
  EXPECT_EQ(run.results[1].beams[0].finish_reason, FinishReason::kLength);
}

TEST(DecodingDecoder, MultiTokenBadWordBansOnlyAfterGeneratedPrefix) {
  SamplingConfig s;
  s.bad_words = {{4, 5}, {2}};
  const int64_t vocab = 8;
  // Preferences: 2 (always banned), then 5; 5's ban applies right after a 4.
  const std::vector<int32_t> script = {4, 5, 5, 4, 5};
  auto fn = [&](int64_t step, int64_t, const std::vector<int32_t>&, float* l) {
    std::fill(l, l + vocab, 0.0f);
    l[1] = 1.0f;  // fallback
    l[2] = 20.0f;
    l[script[step]] = 10.0f;
  };
  const auto run = run_decoder({make_request({6}, 5, s)}, vocab, fn);
  // step 1 wants 5 after 4: banned -> 1; step 2 wants 5 after 1: allowed.
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{4, 1, 5, 4, 1}));
}

TEST(DecodingDecoder, RepetitionPenaltyChangesChoiceThroughDecoder) {
  SamplingConfig s;
  s.repetition_penalty = 4.0;
  const int64_t vocab = 5;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>&, float* l) {
    const float v[] = {0.0f, 3.0f, 2.0f, 1.0f, -1.0f};
    std::copy(v, v + vocab, l);
  };
  // 1 is in the prompt: 3/4 = 0.75 < 2 -> 2; then 2 is penalised too: 0.5 -> 3 (1.0); then 0.
  const auto run = run_decoder({make_request({0, 1}, 4, s)}, vocab, fn);
  EXPECT_EQ(run.results[0].beams[0].output_ids, (std::vector<int32_t>{2, 3, 1, 1}));
}

TEST(DecodingDecoder, CurrentBestStreamsGeneratedTokens) {
  const int64_t vocab = 6;
  Decoder d({make_request({1, 2}, 3)}, vocab);
  std::vector<float> l(vocab, 0.0f);
  l[4] = 1.0f;
  d.step(l.data());
  EXPECT_EQ(d.current_best(0), (std::vector<int32_t>{4}));
  std::fill(l.begin(), l.end(), 0.0f);
  l[3] = 1.0f;
  d.step(l.data());
  EXPECT_EQ(d.current_best(0), (std::vector<int32_t>{4, 3}));
  EXPECT_THROW(d.current_best(1), Error);
}

// Logits that overflowed (NaN, +Inf) at some step (issue 38: they gave token 0 and null log probs,
// silently): the request ends there with nothing drawn, FinishReason::kNonFiniteLogits, the tokens
// before that step kept; a neighbour with finite logits goes on. Sampling rows and beams alike.
// A -Inf logit is a ban (a token never drawn), not an overflow: the request goes on.
TEST(DecodingDecoder, NonFiniteLogitsEndTheRequestAtThatStep) {
  const int64_t vocab = 8;
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    for (const int64_t width : {1, 2}) {
      SamplingConfig s;
      s.beam_width = width;
      s.return_log_probs = true;
      std::vector<DecodeRequest> reqs = {make_request({5}, 6, s), make_request({6}, 6, s)};
      // Request 0's rows overflow from step 2 on (one logit is enough); request 1's never do.
      const auto run = run_decoder(reqs, vocab, [&](int64_t step, int64_t row, const std::vector<int32_t>&, float* l) {
        std::fill(l, l + vocab, 0.0f);
        l[3] = 4.0f;
        l[4] = 3.0f;
        if (row / width == 0 && step >= 2) l[row % 2 ? 7 : 0] = bad;
      });
      SCOPED_TRACE("logit " + std::to_string(bad) + ", beam width " + std::to_string(width));
      const BeamResult& hit = run.results[0].beams[0];
      if (bad < 0) {
        EXPECT_EQ(hit.finish_reason, FinishReason::kLength);
        EXPECT_EQ(hit.output_ids.size(), 6u);
        continue;
      }
      EXPECT_EQ(hit.finish_reason, FinishReason::kNonFiniteLogits);
      EXPECT_STREQ(finish_reason_name(hit.finish_reason), "non_finite_logits");
      EXPECT_EQ(hit.output_ids.size(), 2u) << "the tokens of steps 0 and 1, none from step 2";
      for (float lp : hit.output_log_probs) EXPECT_TRUE(std::isfinite(lp));
      EXPECT_EQ(run.results[1].beams[0].finish_reason, FinishReason::kLength);
      EXPECT_EQ(run.results[1].beams[0].output_ids.size(), 6u);
    }
  }
}

TEST(DecodingDecoder, InvalidRequestsAreErrors) {
  EXPECT_THROW(Decoder({}, 4), Error);
  EXPECT_THROW(Decoder({make_request({}, 3)}, 4), Error);
  EXPECT_THROW(Decoder({make_request({9}, 3)}, 4), Error);  // prompt id outside vocab
  EXPECT_THROW(Decoder({make_request({1}, -1)}, 4), Error);
  SamplingConfig p;
  p.top_p = 5.0;
  EXPECT_THROW(Decoder({make_request({1}, 3, p)}, 4), Error);
  SamplingConfig big_k;
  big_k.top_k = kMaxTopK + 1;
  EXPECT_THROW(Decoder({make_request({1}, 3, big_k)}, 4), Error);
  SamplingConfig wide;
  wide.beam_width = kMaxBeamWidth + 1;
  EXPECT_THROW(Decoder({make_request({1}, 3, wide)}, 4), Error);
  SamplingConfig beam_t0;
  beam_t0.beam_width = 2;
  beam_t0.temperature = 0.0;
  EXPECT_THROW(Decoder({make_request({1}, 3, beam_t0)}, 4), Error);
  SamplingConfig beam2;
  beam2.beam_width = 2;
  EXPECT_THROW(Decoder({make_request({1}, 3), make_request({1}, 3, beam2)}, 4), Error);
  SamplingConfig t;
  t.temperature = -1.0;
  EXPECT_THROW(Decoder({make_request({1}, 3, t)}, 4), Error);
  SamplingConfig k;
  k.top_k = -2;
  EXPECT_THROW(Decoder({make_request({1}, 3, k)}, 4), Error);
  SamplingConfig rp;
  rp.repetition_penalty = 0.0;
  EXPECT_THROW(Decoder({make_request({1}, 3, rp)}, 4), Error);
}

}  // namespace
}  // namespace ftx
