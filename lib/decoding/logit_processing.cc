#include "lib/decoding/logit_processing.h"

#include <cfloat>
#include <cmath>
#include <limits>

namespace ftx::decoding {

bool ends_with_prefix(const std::vector<int32_t>& history, const std::vector<int32_t>& word, size_t n) {
  if (n > word.size() || n > history.size()) return false;
  const size_t base = history.size() - n;
  for (size_t i = 0; i < n; ++i) {
    if (history[base + i] != word[i]) return false;
  }
  return true;
}

int32_t banned_by_word(const std::vector<int32_t>& history, const std::vector<int32_t>& word, int64_t vocab) {
  if (word.empty()) return -1;
  const int32_t banned = word.back();
  // FT's kernel: `0 < banned_token && banned_token < vocab_size_padded`.
  if (banned <= 0 || banned >= vocab) return -1;
  return word.size() == 1 || ends_with_prefix(history, word, word.size() - 1) ? banned : -1;
}

void ban_bad_words(float* logits, int64_t vocab, const std::vector<int32_t>& history,
                   const TokenWords& bad_words) {
  for (const auto& word : bad_words) {
    const int32_t banned = banned_by_word(history, word, vocab);
    if (banned >= 0) logits[banned] = -std::numeric_limits<float>::infinity();
  }
}

void apply_temperature(float* logits, int64_t vocab, double temperature) {
  if (temperature == 1.0) return;
  // FT multiplies by the float inverse rather than dividing each logit.
  const float inverse = 1.0f / (static_cast<float>(temperature) + 1e-6f);
  for (int64_t i = 0; i < vocab; ++i) logits[i] *= inverse;
}

Penalties penalties_of(const SamplingConfig& config) {
  return {config.repetition_penalty, config.presence_penalty, config.frequency_penalty};
}

float penalized(float l, const Penalties& p, int32_t count) {
  if (p.repetition != 1.0) {
    const float rp = static_cast<float>(p.repetition);
    l = l < 0.0f ? l * rp : l / rp;
  }
  if (p.presence != 0.0) l = l - static_cast<float>(p.presence);
  if (p.frequency != 0.0) {
    const float f = static_cast<float>(p.frequency) * static_cast<float>(count);  // TRT-LLM: float * int
    l = l - f;
  }
  return l;
}

void apply_penalty_to_ids(float* logits, const int32_t* ids, const int32_t* counts, int64_t n, const Penalties& p) {
  if (!p.any()) return;
  for (int64_t i = 0; i < n; ++i) logits[ids[i]] = penalized(logits[ids[i]], p, counts[i]);
}

void replace_nan(float* logits, int64_t vocab) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
#pragma omp simd  // a select, not a branch: one vectorised pass
  for (int64_t i = 0; i < vocab; ++i) logits[i] = logits[i] != logits[i] ? neg_inf : logits[i];
}

bool overflowed(const float* logits, int64_t vocab) {
  int bad = 0;
#pragma omp simd reduction(| : bad)  // one vectorised pass, no early exit
  for (int64_t i = 0; i < vocab; ++i) bad |= !(logits[i] <= std::numeric_limits<float>::max());  // NaN, +Inf
  return bad != 0;
}

void apply_penalties(float* logits, int64_t vocab, const std::vector<int32_t>& history, const Penalties& p,
                     TokenCounts& counts) {
  if (!p.any()) return;
  for (int32_t id : history)
    if (id >= 0 && id < vocab) ++counts[id];
  for (int32_t id : history) {
    if (id < 0 || id >= vocab || counts[id] == 0) continue;
    logits[id] = penalized(logits[id], p, counts[id]);
    counts[id] = 0;  // each id once; back to zero for the next row
  }
}

void apply_min_length(float* logits, int64_t vocab, int32_t end_id, int64_t generated,
                      int64_t min_length) {
  if (generated < min_length && end_id >= 0 && end_id < vocab) logits[end_id] = -FLT_MAX;
}

void process_logits(float* logits, int64_t vocab, const SamplingConfig& config,
                    const std::vector<int32_t>& history, int64_t generated, TokenCounts& counts) {
  replace_nan(logits, vocab);  // NaN would break the strict ordering the selection relies on
  ban_bad_words(logits, vocab, history, config.bad_words);
  apply_temperature(logits, vocab, config.temperature);
  // FT applies penalties only from step > 1, i.e. once the sequence holds 2+ tokens; judged per
  // row here (FT uses the batch's padded width) so a request behaves the same in any batch.
  if (history.size() > 1) apply_penalties(logits, vocab, history, penalties_of(config), counts);
  apply_min_length(logits, vocab, config.end_id, generated, config.min_length);
}

}  // namespace ftx::decoding
