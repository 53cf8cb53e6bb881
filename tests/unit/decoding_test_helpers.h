#pragma once
// Shared helpers for tests/unit/decoding_*_test.cc: a tiny stand-in for the engine's generation
// loop that feeds constructed logits to a Decoder and follows beam parents like a KV cache would.
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "lib/decoding/decoder.h"

namespace ftx::testing {

// Fills `logits` [vocab] for one row given the step (0 = first new token) and the row's history
// (prompt + tokens so far, following parents).
using LogitsFn = std::function<void(int64_t step, int64_t row, const std::vector<int32_t>& history, float* logits)>;

struct DecodeRun {
  std::vector<StepOutput> steps;
  std::vector<RequestResult> results;
  int64_t steps_taken = 0;
};

inline DecodeRun run_decoder(const std::vector<DecodeRequest>& requests, int64_t vocab, const LogitsFn& fn,
                             int64_t max_steps = 1000) {
  Decoder decoder(requests, vocab);
  const int64_t rows = decoder.rows();
  const int64_t K = decoder.beam_width();
  std::vector<std::vector<int32_t>> history(rows);
  for (int64_t r = 0; r < rows; ++r) history[r] = requests[r / K].input_ids;
  std::vector<float> logits(rows * vocab);
  DecodeRun run;
  for (int64_t step = 0; step < max_steps && !decoder.all_finished(); ++step) {
    for (int64_t r = 0; r < rows; ++r) fn(step, r, history[r], logits.data() + r * vocab);
    const StepOutput& out = decoder.step(logits.data());
    run.steps.push_back(out);
    std::vector<std::vector<int32_t>> next(rows);
    for (int64_t r = 0; r < rows; ++r) {
      next[r] = history[out.parents[r]];
      next[r].push_back(out.tokens[r]);
    }
    history.swap(next);
    ++run.steps_taken;
  }
  run.results = decoder.results();
  return run;
}

// Deterministic pseudo-random logits that depend only on (seed, history): a request sees the same
// logits whatever batch it is in.
inline void hashed_logits(uint64_t seed, const std::vector<int32_t>& history, float* logits, int64_t vocab,
                          double scale = 3.0) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull;
  for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001B3ull;
  std::mt19937_64 gen(h);
  std::normal_distribution<double> normal(0.0, scale);
  for (int64_t i = 0; i < vocab; ++i) logits[i] = static_cast<float>(normal(gen));
}

// log-softmax in double, computed independently of lib/decoding.
inline std::vector<double> log_softmax(const float* logits, int64_t vocab) {
  double max = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  std::vector<double> out(vocab);
  for (int64_t i = 0; i < vocab; ++i) out[i] = static_cast<double>(logits[i]) - max - std::log(sum);
  return out;
}

inline DecodeRequest make_request(std::vector<int32_t> prompt, int64_t max_new_tokens, SamplingConfig s = {}) {
  DecodeRequest r;
  r.input_ids = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.sampling = std::move(s);
  return r;
}

}  // namespace ftx::testing
