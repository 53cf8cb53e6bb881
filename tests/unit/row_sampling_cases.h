#pragma once
// Random sampling batches for the Backend::sample_rows tests (decoding_row_sampling_test on the
// CPU, cuda_sampling_test on a GPU): logits [rows, stride] with padding columns, every sampling
// mode, bad words, penalties, min_length, temperature, and the hard cases for a selection: NaN,
// many exact ties (logits on a coarse grid), -0 beside +0, rows that are all -inf.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "lib/decoding/decoder.h"
#include "lib/decoding/row_sampling.h"
#include "lib/decoding/sampling.h"

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
    else if (chance(0.3)) cfg.presence_penalty = std::uniform_real_distribution<double>(-1.0, 2.0)(gen);
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
  std::vector<uint8_t> seen(static_cast<size_t>(c.vocab), 0);
  for (const SamplingRow& s : c.rows)
    decoding::add_row_sampling(batch, s.row, c.vocab, s.config, s.mode, s.top_p, s.u, s.history, s.generated, seen);
  return batch;
}

}  // namespace ftx::test
