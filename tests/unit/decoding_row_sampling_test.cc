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
#include "unit/decoding_test_helpers.h"
#include "unit/row_sampling_cases.h"

namespace ftx {
namespace {

using decoding::RowSamplingBatch;
using decoding::SampledToken;

// The decoder's path (Decoder::Impl::sampling_step): process_logits, then sample().
std::vector<SampledToken> decoder_reference(const test::SamplingCase& c) {
  std::vector<float> logits = c.logits;
  std::vector<uint8_t> seen(c.vocab, 0);
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

// Decoder::step on a backend's padded logits (the CPU backend here; the CUDA one in
// cuda_sampling_test) against Decoder::step on host logits: the same requests, the same logits, the
// same StepOutputs and results, bit for bit, for sampling (every mode, log probs, the factual
// nucleus, penalties, bad and stop words, a paused slot) and for beam search.
void expect_backend_step_equals_host_step(const std::vector<DecodeRequest>& requests, int64_t vocab) {
  auto be = ops::make_backend("cpu", 2);
  const int64_t stride = vocab + 5;
  Decoder host(requests, vocab), device(requests, vocab);
  const int64_t rows = host.rows();
  std::vector<float> logits(static_cast<size_t>(rows * vocab)), padded(static_cast<size_t>(rows * stride), 1e30f);
  for (int64_t step = 0; step < 40 && !host.all_finished(); ++step) {
    if (step == 3) {  // preemption: slot 1 sits steps 3 and 4 out on both
      host.set_paused(1, true);
      device.set_paused(1, true);
    }
    if (step == 5) {
      host.set_paused(1, false);
      device.set_paused(1, false);
    }
    for (int64_t r = 0; r < rows; ++r) {
      testing::hashed_logits(static_cast<uint64_t>(r / host.beam_width()) + 1, host.history(r), logits.data() + r * vocab,
                             vocab);
      std::copy_n(logits.begin() + r * vocab, vocab, padded.begin() + r * stride);
    }
    const StepOutput want = host.step(logits.data());
    const StepOutput& got = device.step(*be, padded.data(), stride);
    ASSERT_EQ(want.tokens, got.tokens) << "step " << step;
    ASSERT_EQ(want.parents, got.parents) << "step " << step;
    ASSERT_EQ(want.finished, got.finished) << "step " << step;
  }
  const std::vector<RequestResult> a = host.results(), b = device.results();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].beams.size(), b[i].beams.size());
    for (size_t k = 0; k < a[i].beams.size(); ++k) {
      EXPECT_EQ(a[i].beams[k].output_ids, b[i].beams[k].output_ids) << "request " << i;
      EXPECT_EQ(a[i].beams[k].cum_log_prob, b[i].beams[k].cum_log_prob) << "request " << i;
      EXPECT_EQ(a[i].beams[k].output_log_probs, b[i].beams[k].output_log_probs) << "request " << i;
      EXPECT_EQ(a[i].beams[k].finish_reason, b[i].beams[k].finish_reason) << "request " << i;
    }
  }
}

TEST(DecodingRowSampling, DecoderStepOnABackendEqualsTheHostStep) {
  const int64_t vocab = 3000;
  std::vector<DecodeRequest> sampling;
  for (int i = 0; i < 6; ++i) {
    DecodeRequest r;
    r.input_ids = {static_cast<int32_t>(10 + i), 7, 7};
    r.max_new_tokens = 12 + i;
    r.sampling.seed = 100 + i;
    r.sampling.return_log_probs = i % 2 == 0;
    if (i == 1) r.sampling.top_k = 40;
    if (i == 2) {
      r.sampling.top_k = 8;
      r.sampling.top_p = 0.7;
      r.sampling.temperature = 0.8;
    }
    if (i == 3) {
      r.sampling.top_p = 0.9;
      r.sampling.top_p_decay = 0.9;
      r.sampling.top_p_min = 0.3;
      r.sampling.repetition_penalty = 1.3;
    }
    if (i == 4) {
      r.sampling.top_k = 1024;
      r.sampling.presence_penalty = 0.5;
      r.sampling.bad_words = {{7, 11}, {12}};
      r.sampling.stop_words = {{5}};
      r.sampling.end_id = 3;
      r.sampling.min_length = 4;
    }
    if (i == 5) r.sampling.temperature = 0.0;  // greedy
    sampling.push_back(r);
  }
  expect_backend_step_equals_host_step(sampling, vocab);
  std::vector<DecodeRequest> beams(3);
  for (int i = 0; i < 3; ++i) {
    beams[i].input_ids = {static_cast<int32_t>(20 + i)};
    beams[i].max_new_tokens = 9;
    beams[i].sampling.beam_width = 3;
    beams[i].sampling.len_penalty = 0.5 * i;
    beams[i].sampling.end_id = 4;
  }
  expect_backend_step_equals_host_step(beams, vocab);
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
  std::vector<uint8_t> seen(20, 0);
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
  EXPECT_EQ(r.min_length_id, 1);                            // generated 2 < min_length 3
  for (uint8_t s : seen) EXPECT_EQ(s, 0);                   // scratch left clean
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
