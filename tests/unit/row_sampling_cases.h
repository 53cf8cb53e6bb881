#pragma once
// Random sampling batches and decoder runs for the Backend::sample_rows tests (decoding_row_sampling_test on the
// CPU, cuda_sampling_test on a GPU): logits [rows, stride] with padding columns, every sampling
// mode, bad words, penalties, min_length, temperature, and the hard cases for a selection: NaN,
// many exact ties (logits on a coarse grid), -0 beside +0, rows that are all -inf.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "lib/decoding/decoder.h"
#include "lib/decoding/row_sampling.h"
#include "lib/decoding/sampling.h"
#include "lib/ops/backend.h"
#include "unit/decoding_test_helpers.h"

namespace ftx::test {

struct SamplingRow {
  int64_t row = 0;
  SamplingConfig config;
  decoding::SamplingMode mode;
  double top_p = 1.0;
  double u = 1.0;
  std::vector<int32_t> history;
  int64_t generated = 0;
};

struct SamplingCase {
  int64_t vocab = 0, stride = 0, logit_rows = 0;
  std::vector<float> logits;  // [logit_rows, stride]
  std::vector<SamplingRow> rows;
};

inline SamplingCase make_sampling_case(uint64_t seed) {
  std::mt19937_64 gen(seed * 7919 + 1);
  auto uniform_int = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(gen) < p; };
  static const int64_t kVocabs[] = {1, 7, 100, 1000, 1024, 1025, 5000, 32000, 50257};
  SamplingCase c;
  c.vocab = kVocabs[seed % (sizeof(kVocabs) / sizeof(kVocabs[0]))];
  c.stride = (c.vocab + 7) / 8 * 8 + (seed % 2 ? 8 : 0);
  c.logit_rows = uniform_int(1, 12);
  c.logits.assign(static_cast<size_t>(c.logit_rows * c.stride), 0.0f);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < c.logit_rows; ++r) {
    float* l = c.logits.data() + r * c.stride;
    const int style = static_cast<int>(uniform_int(0, 5));
    for (int64_t i = 0; i < c.stride; ++i) {
      float x = normal(gen);
      if (style == 1) x = std::round(x);          // many exact ties
      if (style == 2) x = std::round(x) * 0.0f;   // only +0 and -0 (ties across the sign)
      if (style == 3 && chance(0.5)) x = -inf;    // half banned
      if (style == 4) x = nan;                    // all NaN: every logit -inf
      if (chance(0.01)) x = nan;
      if (i >= c.vocab) x = 1e30f;                // padding columns must never be read
      l[i] = x;
    }
  }
  // Entries: a subset of the rows, in shuffled order (rows are independent of their neighbours).
  std::vector<int64_t> order;
  for (int64_t r = 0; r < c.logit_rows; ++r)
    if (chance(0.85)) order.push_back(r);
  std::shuffle(order.begin(), order.end(), gen);
  for (int64_t r : order) {
    SamplingRow s;
    s.row = r;
    SamplingConfig& cfg = s.config;
    const int mode = static_cast<int>(uniform_int(0, 3));
    if (mode == 1) cfg.top_k = uniform_int(1, 1024);
    if (mode == 2) {
      cfg.top_k = uniform_int(1, 64);
      cfg.top_p = std::uniform_real_distribution<double>(0.05, 1.0)(gen);
    }
    if (mode == 3) cfg.top_p = std::uniform_real_distribution<double>(0.01, 1.0)(gen);
    if (mode != 0 && chance(0.5)) cfg.temperature = std::uniform_real_distribution<double>(0.3, 2.0)(gen);
    if (chance(0.3)) cfg.repetition_penalty = std::uniform_real_distribution<double>(0.5, 2.0)(gen);
    if (chance(0.3)) cfg.presence_penalty = std::uniform_real_distribution<double>(-1.0, 2.0)(gen);
    if (chance(0.3)) cfg.frequency_penalty = std::uniform_real_distribution<double>(-0.5, 1.5)(gen);
    cfg.return_log_probs = chance(0.5);
    const int64_t len = uniform_int(1, 40);
    for (int64_t i = 0; i < len; ++i) s.history.push_back(static_cast<int32_t>(uniform_int(0, c.vocab - 1)));
    s.generated = uniform_int(0, len);
    if (chance(0.3)) {
      cfg.end_id = static_cast<int32_t>(uniform_int(0, c.vocab - 1));
      cfg.min_length = uniform_int(0, 5);
    }
    const int words = static_cast<int>(uniform_int(0, 3));
    for (int w = 0; w < words; ++w) {
      std::vector<int32_t> word;
      if (chance(0.5)) word.push_back(s.history.back());  // a two-token word whose prefix matches
      word.push_back(static_cast<int32_t>(uniform_int(0, c.vocab - 1)));
      cfg.bad_words.push_back(word);
    }
    s.mode = decoding::resolve_sampling_mode(cfg.top_k, cfg.top_p, c.vocab);
    s.top_p = s.mode.kind == decoding::SamplingMode::kTopP ? s.mode.top_p * (chance(0.5) ? 0.7 : 1.0) : s.mode.top_p;
    s.u = (static_cast<double>(gen() >> 11) + 1.0) * 0x1.0p-53;
    c.rows.push_back(s);
  }
  return c;
}

// The batch sample_rows takes for the case (what the decoder resolves on the host).
inline decoding::RowSamplingBatch resolve(const SamplingCase& c) {
  decoding::RowSamplingBatch batch;
  std::vector<int32_t> seen(static_cast<size_t>(c.vocab), 0);
  for (const SamplingRow& s : c.rows)
    decoding::add_row_sampling(batch, s.row, c.vocab, s.config, s.mode, s.top_p, s.u, s.history, s.generated, seen);
  return batch;
}

// Decoder::step on a backend's padded logits (the CPU backend here; the CUDA one in
// cuda_sampling_test) against Decoder::step on host logits: the same requests, the same logits, the
// same StepOutputs and results, bit for bit, for sampling (every mode, log probs, the factual
// nucleus, penalties, bad and stop words, a paused slot) and for beam search.
inline void expect_backend_step_equals_host_step(ops::Backend& be, const std::vector<DecodeRequest>& requests,
                                                 int64_t vocab, double log_prob_tolerance) {
  const int64_t stride = vocab + 5;
  Decoder host(requests, vocab), device(requests, vocab);
  const int64_t rows = host.rows();
  std::vector<float> logits(static_cast<size_t>(rows * vocab)), padded(static_cast<size_t>(rows * stride), 1e30f);
  float* in_backend = be.alloc(padded.size());
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
    be.upload(in_backend, padded.data(), padded.size());
    const StepOutput& got = device.step(be, in_backend, stride);
    ASSERT_EQ(want.tokens, got.tokens) << "step " << step;
    ASSERT_EQ(want.parents, got.parents) << "step " << step;
    ASSERT_EQ(want.finished, got.finished) << "step " << step;
  }
  be.release(in_backend);
  auto close = [&](double x, double y) { return x == y || std::fabs(x - y) <= log_prob_tolerance; };
  const std::vector<RequestResult> a = host.results(), b = device.results();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].beams.size(), b[i].beams.size());
    for (size_t k = 0; k < a[i].beams.size(); ++k) {
      EXPECT_EQ(a[i].beams[k].output_ids, b[i].beams[k].output_ids) << "request " << i;
      EXPECT_PRED2(close, a[i].beams[k].cum_log_prob, b[i].beams[k].cum_log_prob) << "request " << i;
      ASSERT_EQ(a[i].beams[k].output_log_probs.size(), b[i].beams[k].output_log_probs.size()) << "request " << i;
      for (size_t t = 0; t < a[i].beams[k].output_log_probs.size(); ++t)
        EXPECT_PRED2(close, a[i].beams[k].output_log_probs[t], b[i].beams[k].output_log_probs[t])
            << "request " << i << " token " << t;
      EXPECT_EQ(a[i].beams[k].finish_reason, b[i].beams[k].finish_reason) << "request " << i;
    }
  }
}

// Six requests, one per sampling mode and feature (greedy, top-k, top-k with p and temperature,
// top-p with decay and penalty, k = 1024 with presence penalty, bad and stop words, end id and
// min_length, temperature 0).
inline std::vector<DecodeRequest> mixed_sampling_requests() {
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
      r.sampling.repetition_penalty = 1.2;
      r.sampling.frequency_penalty = 0.3;
      r.sampling.bad_words = {{7, 11}, {12}};
      r.sampling.stop_words = {{5}};
      r.sampling.end_id = 3;
      r.sampling.min_length = 4;
    }
    if (i == 5) r.sampling.temperature = 0.0;  // greedy
    sampling.push_back(r);
  }
  return sampling;
}

inline std::vector<DecodeRequest> beam_requests() {
  std::vector<DecodeRequest> beams(3);
  for (int i = 0; i < 3; ++i) {
    beams[i].input_ids = {static_cast<int32_t>(20 + i)};
    beams[i].max_new_tokens = 9;
    beams[i].sampling.beam_width = 3;
    beams[i].sampling.len_penalty = 0.5 * i;
    beams[i].sampling.end_id = 4;
  }
  return beams;
}

}  // namespace ftx::test
