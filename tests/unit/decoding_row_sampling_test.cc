// Backend::sample_rows on the CPU (lib/decoding/row_sampling.h): the rows resolved on the host and
// sampled by the op give bit for bit the tokens and log probs of the decoder's own pipeline
// (process_logits on the row's history, then sample()), for every mode, with bad words, penalties,
// min_length, NaN, ties, ±0 and all -inf rows, through the CPU backend's override and through the
// base class's default (download, then the host code). The CUDA implementation is compared against
// this same op in cuda_sampling_test (label gpu).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "formats/error.h"
#include "lib/decoding/logit_processing.h"
#include "lib/decoding/row_sampling.h"
#include "lib/ops/backend.h"
#include "unit/row_sampling_cases.h"

namespace ftx {
namespace {

using decoding::RowSamplingBatch;
using decoding::SampledToken;

// The decoder's path (Decoder::Impl::sampling_step): process_logits, then sample().
std::vector<SampledToken> decoder_reference(const test::SamplingCase& c) {
  std::vector<float> logits = c.logits;
  std::vector<int32_t> seen(c.vocab, 0);
  decoding::SamplingWorkspace ws;
  std::vector<SampledToken> out;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const test::SamplingRow& r = c.rows[i];
    float* l = logits.data() + r.row * c.stride;
    decoding::process_logits(l, c.vocab, r.config, r.history, r.generated, seen);
    out.push_back(decoding::sample(l, c.vocab, r.mode, r.top_p, r.u, ws, r.config.return_log_probs));
  }
  return out;
}

void expect_same(const std::vector<SampledToken>& want, const std::vector<SampledToken>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].token, got[i].token) << what << " row " << i;
    // Bit-equal: the same code on the same floats (NaN never occurs: -inf for banned rows).
    EXPECT_EQ(want[i].log_prob, got[i].log_prob) << what << " row " << i;
    EXPECT_EQ(want[i].output_log_prob, got[i].output_log_prob) << what << " row " << i;
  }
}

TEST(DecodingRowSampling, CpuOpEqualsTheDecodersPipeline) {
  auto be = ops::make_backend("cpu", 1);
  int checked = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const test::SamplingCase c = test::make_sampling_case(seed);
    const std::vector<SampledToken> want = decoder_reference(c);
    const RowSamplingBatch batch = test::resolve(c);
    for (bool base_default : {false, true}) {
      std::vector<float> logits = c.logits;
      std::vector<SampledToken> got(batch.rows.size());
      if (base_default) {
        be->ops::Backend::sample_rows(logits.data(), c.stride, c.vocab, batch, got.data());
      } else {
        be->sample_rows(logits.data(), c.stride, c.vocab, batch, got.data());
      }
      expect_same(want, got, "seed " + std::to_string(seed) + (base_default ? " (default)" : " (cpu)"));
      checked += static_cast<int>(got.size());
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(DecodingRowSampling, DecoderStepOnABackendEqualsTheHostStep) {
  auto be = ops::make_backend("cpu", 2);
  test::expect_backend_step_equals_host_step(*be, test::mixed_sampling_requests(), 3000, 0.0);
  test::expect_backend_step_equals_host_step(*be, test::beam_requests(), 3000, 0.0);
}

TEST(DecodingRowSampling, DecoderRefusesAStrideBelowTheVocabulary) {
  auto be = ops::make_backend("cpu", 1);
  DecodeRequest r;
  r.input_ids = {1};
  r.max_new_tokens = 2;
  Decoder d({r}, 10);
  std::vector<float> logits(10, 0.0f);
  EXPECT_THROW(d.step(*be, logits.data(), 9), Error);
}

TEST(DecodingRowSampling, ResolvesBadWordsPenaltiesAndMinLength) {
  SamplingConfig cfg;
  cfg.bad_words = {{5}, {2, 3}, {9, 7}, {0}, {40}};  // {2,3}: history ends with 2; {0}, {40}: never banned
  cfg.repetition_penalty = 1.5;
  cfg.min_length = 3;
  cfg.end_id = 1;
  const std::vector<int32_t> history = {4, 4, 11, 2};
  std::vector<int32_t> seen(20, 0);
  RowSamplingBatch batch;
  decoding::add_row_sampling(batch, 3, 20, cfg, decoding::resolve_sampling_mode(0, 0.0, 20), 1.0, 0.5, history, 2,
                             seen);
  ASSERT_EQ(batch.rows.size(), 1u);
  const decoding::RowSampling& r = batch.rows[0];
  EXPECT_EQ(r.row, 3);
  std::vector<int32_t> banned(batch.ids.begin() + r.banned_offset, batch.ids.begin() + r.banned_offset + r.banned_count);
  std::vector<int32_t> penalized(batch.ids.begin() + r.penalized_offset,
                                 batch.ids.begin() + r.penalized_offset + r.penalized_count);
  EXPECT_EQ(banned, (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(penalized, (std::vector<int32_t>{4, 11, 2}));  // distinct, in history order
  std::vector<int32_t> counts(batch.ids.begin() + r.penalized_offset + r.penalized_count,
                              batch.ids.begin() + r.penalized_offset + 2 * r.penalized_count);
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 1, 1}));       // then how often the history holds each
  EXPECT_EQ(r.min_length_id, 1);                            // generated 2 < min_length 3
  for (int32_t s : seen) EXPECT_EQ(s, 0);                   // scratch left clean
  // A one-token history is not penalised (process_logits' rule), and min_length reached frees end_id.
  decoding::add_row_sampling(batch, 0, 20, cfg, r.mode, 1.0, 0.5, {4}, 3, seen);
  EXPECT_EQ(batch.rows[1].penalized_count, 0);
  EXPECT_EQ(batch.rows[1].min_length_id, -1);
}

TEST(DecodingRowSampling, RefusesANegativeRowAndARowNamedTwice) {
  auto be = ops::make_backend("cpu", 1);
  std::vector<float> logits(16, 0.0f);
  SampledToken out[2];
  for (const std::vector<int64_t>& rows : {std::vector<int64_t>{-2}, std::vector<int64_t>{1, 1}}) {
    RowSamplingBatch batch;
    for (int64_t r : rows) {
      batch.rows.emplace_back();
      batch.rows.back().row = r;
    }
    const std::string want = rows[0] < 0 ? "row -2 is negative" : "row 1 is named twice";
    for (bool base_default : {false, true}) {
      try {
        if (base_default) {
          be->ops::Backend::sample_rows(logits.data(), 8, 8, batch, out);
        } else {
          be->sample_rows(logits.data(), 8, 8, batch, out);
        }
        ADD_FAILURE() << "no error for " << want;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace ftx
