// The pre-sampling logit pipeline (docs/runtime.md#the-logits-of-a-step): exact values per stage.
#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <limits>

#include "formats/error.h"
#include "lib/decoding/logit_processing.h"
#include "lib/decoding/row_sampling.h"
#include "unit/decoding_test_helpers.h"

namespace ftx {
namespace {

using decoding::apply_min_length;
using decoding::apply_penalties;
using decoding::RowSamplingBatch;
using decoding::apply_temperature;
using decoding::ban_bad_words;
using decoding::process_logits;

constexpr float kInf = std::numeric_limits<float>::infinity();

decoding::Penalties penalties(double rp, double pp, double fp) { return {rp, pp, fp}; }

TEST(DecodingLogits, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerDistinctId) {
  std::vector<float> l = {2.0f, -1.0f, 0.5f, -3.0f, 4.0f, 0.0f};
  std::vector<int32_t> seen(l.size(), 0);
  // id 1 appears three times: penalised once (repetition ignores counts); id 5 has logit 0: 0/p = 0.
  apply_penalties(l.data(), 6, {0, 1, 1, 3, 1, 5}, penalties(2.0, 0.0, 0.0), seen);
  EXPECT_EQ(l[0], 1.0f);    // 2 / 2
  EXPECT_EQ(l[1], -2.0f);   // -1 * 2
  EXPECT_EQ(l[2], 0.5f);    // untouched
  EXPECT_EQ(l[3], -6.0f);   // -3 * 2
  EXPECT_EQ(l[4], 4.0f);    // untouched
  EXPECT_EQ(l[5], 0.0f);
  for (int32_t s : seen) EXPECT_EQ(s, 0);  // scratch handed back clean
}

TEST(DecodingLogits, RepetitionPenaltyBelowOneBoostsSeenTokens) {
  std::vector<float> l = {3.0f, -4.0f};
  std::vector<int32_t> seen(2, 0);
  apply_penalties(l.data(), 2, {0, 1}, penalties(0.5, 0.0, 0.0), seen);
  EXPECT_EQ(l[0], 6.0f);
  EXPECT_EQ(l[1], -2.0f);
}

TEST(DecodingLogits, PresencePenaltySubtractsOncePerDistinctId) {
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 7.0f};
  std::vector<int32_t> seen(4, 0);
  apply_penalties(l.data(), 4, {3, 1, 3, 3}, penalties(1.0, 0.75, 0.0), seen);
  EXPECT_EQ(l[0], 2.0f);
  EXPECT_EQ(l[1], -1.75f);
  EXPECT_EQ(l[2], 0.5f);
  EXPECT_EQ(l[3], 6.25f);
}

// The float64 reference of TensorRT-LLM's rule (penaltyKernels.cu): an id the history holds n > 0
// times gets, in this order, l < 0 ? l * rp : l / rp, then l - pp, then l - fp * n.
double trtllm_penalized(double l, double rp, double pp, double fp, int n) {
  if (n == 0) return l;
  l = l < 0 ? l * rp : l / rp;
  return l - pp - fp * n;
}

TEST(DecodingLogits, I49_PenaltiesCombineAsTensorRtLlmWithCounts) {
  const std::vector<float> in = {2.5f, -1.25f, 0.75f, 3.0f, -0.5f, 1.0f, 0.0f};
  const std::vector<int32_t> history = {3, 1, 3, 0, 3, 4, 1, 9, -1};  // 9 and -1 lie outside the vocab
  const int counts[] = {1, 2, 0, 3, 1, 0, 0};
  for (const auto& [rp, pp, fp] : {std::array<double, 3>{1.3, 0.4, 0.25}, std::array<double, 3>{0.8, -0.2, 0.6},
                                   std::array<double, 3>{1.0, 0.0, 0.5}, std::array<double, 3>{2.0, 1.0, -0.125}}) {
    std::vector<float> l = in;
    std::vector<int32_t> seen(l.size(), 0);
    apply_penalties(l.data(), 7, history, penalties(rp, pp, fp), seen);
    for (size_t i = 0; i < l.size(); ++i)
      EXPECT_NEAR(l[i], trtllm_penalized(in[i], rp, pp, fp, counts[i]), 1e-6)
          << "id " << i << " rp " << rp << " pp " << pp << " fp " << fp;
    for (int32_t s : seen) EXPECT_EQ(s, 0);
    // The same rule through row sampling's resolved ids and counts.
    RowSamplingBatch batch;
    SamplingConfig cfg;
    cfg.repetition_penalty = rp, cfg.presence_penalty = pp, cfg.frequency_penalty = fp;
    decoding::add_row_sampling(batch, 0, 7, cfg, decoding::resolve_sampling_mode(0, 0.0, 7), 1.0, 0.5, history, 0, seen);
    std::vector<float> row = in;
    decoding::process_row_logits(row.data(), 7, batch.rows[0], batch.ids.data());
    EXPECT_EQ(row, l);
  }
}

TEST(DecodingLogits, I49_AllThreePenaltiesAreAccepted) {
  SamplingConfig s;
  s.repetition_penalty = 1.1;
  s.presence_penalty = 0.3;
  s.frequency_penalty = 0.2;
  EXPECT_NO_THROW(Decoder({testing::make_request({1, 2}, 4, s)}, 8));
  s.frequency_penalty = std::numeric_limits<double>::infinity();
  try {
    Decoder({testing::make_request({1, 2}, 4, s)}, 8);
    ADD_FAILURE() << "an infinite frequency_penalty was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("frequency_penalty inf is not finite"), std::string::npos) << e.what();
  }
}

TEST(DecodingLogits, TemperatureMultipliesByInverseOfTPlusEpsilon) {
  std::vector<float> l = {1.0f, -2.0f, 0.25f};
  apply_temperature(l.data(), 3, 0.5);
  const float inv = 1.0f / (0.5f + 1e-6f);
  EXPECT_EQ(l[0], 1.0f * inv);
  EXPECT_EQ(l[1], -2.0f * inv);
  EXPECT_EQ(l[2], 0.25f * inv);
  EXPECT_NEAR(l[0], 2.0f, 1e-5);
  std::vector<float> same = {1.0f, -2.0f};
  apply_temperature(same.data(), 2, 1.0);  // T == 1: untouched, no epsilon
  EXPECT_EQ(same[0], 1.0f);
  EXPECT_EQ(same[1], -2.0f);
}

TEST(DecodingLogits, MinLengthBansEndIdOnlyWhileShort) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  apply_min_length(l.data(), 3, 2, 1, 2);
  EXPECT_EQ(l[2], -FLT_MAX);
  std::vector<float> m = {1.0f, 2.0f, 3.0f};
  apply_min_length(m.data(), 3, 2, 2, 2);
  EXPECT_EQ(m[2], 3.0f);
}

TEST(DecodingLogits, SingleTokenBadWordAlwaysBannedIdZeroNever) {
  std::vector<float> l(6, 1.0f);
  ban_bad_words(l.data(), 6, {5}, {{3}, {0}, {9}});  // 9 is outside the vocab: ignored
  EXPECT_EQ(l[3], -kInf);
  EXPECT_EQ(l[0], 1.0f);
  for (int i : {1, 2, 4, 5}) EXPECT_EQ(l[i], 1.0f);
}

TEST(DecodingLogits, MultiTokenBadWordBansLastTokenOnlyAfterItsPrefix) {
  const decoding::TokenWords words = {{4, 2, 3}};
  std::vector<float> l(6, 1.0f);
  ban_bad_words(l.data(), 6, {1, 4, 2}, words);  // prefix 4 2 just emitted
  EXPECT_EQ(l[3], -kInf);
  std::vector<float> partial(6, 1.0f);
  ban_bad_words(partial.data(), 6, {1, 5, 2}, words);  // only the last prefix token matches
  EXPECT_EQ(partial[3], 1.0f);
  std::vector<float> older(6, 1.0f);
  ban_bad_words(older.data(), 6, {4, 2, 1}, words);  // prefix earlier in history, not at the end
  EXPECT_EQ(older[3], 1.0f);
  std::vector<float> short_history(6, 1.0f);
  ban_bad_words(short_history.data(), 6, {2}, words);
  EXPECT_EQ(short_history[3], 1.0f);
  for (int i : {0, 1, 2, 4, 5}) EXPECT_EQ(l[i], 1.0f);  // first tokens of the word are never banned
}

TEST(DecodingLogits, PipelineOrderBanThenTemperatureThenPenaltyThenMinLength) {
  SamplingConfig s;
  s.temperature = 2.0;
  s.repetition_penalty = 1.5;
  s.frequency_penalty = 0.25;
  s.min_length = 3;
  s.end_id = 0;
  s.bad_words = {{7, 5}};
  std::vector<float> l = {4.0f, 3.0f, -3.0f, 1.0f, 0.5f, 6.0f, -1.0f, 2.0f};
  std::vector<int32_t> seen(8, 0);
  process_logits(l.data(), 8, s, {1, 2, 1, 7}, 1, seen);
  const float inv = 1.0f / (2.0f + 1e-6f);
  EXPECT_EQ(l[0], -FLT_MAX);                        // min_length: 1 generated < 3
  EXPECT_EQ(l[1], (3.0f * inv) / 1.5f - 0.5f);      // temperature first, then the penalties (1 twice)
  EXPECT_EQ(l[2], (-3.0f * inv) * 1.5f - 0.25f);
  EXPECT_EQ(l[3], 1.0f * inv);
  EXPECT_EQ(l[5], -kInf);                           // 7 5: prefix 7 at the end -> 5 banned
  EXPECT_EQ(l[7], (2.0f * inv) / 1.5f - 0.25f);
}

TEST(DecodingLogits, PenaltySkippedWhileSequenceHasOneToken) {
  // FT applies penalties from step > 1 only: with a one-token prompt the first step is unpenalised.
  SamplingConfig s;
  s.presence_penalty = 1.0;
  std::vector<float> l = {1.0f, 2.0f};
  std::vector<int32_t> seen(2, 0);
  process_logits(l.data(), 2, s, {1}, 0, seen);
  EXPECT_EQ(l[1], 2.0f);
  process_logits(l.data(), 2, s, {1, 0}, 1, seen);
  EXPECT_EQ(l[1], 1.0f);
  EXPECT_EQ(l[0], 0.0f);
}

}  // namespace
}  // namespace ftx
