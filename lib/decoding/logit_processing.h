#pragma once
// The per-row logit pipeline that runs before sampling or beam search (FT DynamicDecodeLayer
// order): bad-words ban, temperature, penalties (repetition, presence, frequency; TensorRT-LLM's
// combination), min_length. Each stage is a free function so tests can check its exact effect.
#include <cstdint>
#include <vector>

#include "lib/decoding/decoder.h"

namespace ftx::decoding {

using TokenWords = std::vector<std::vector<int32_t>>;

// True when `history` ends with the first `n` tokens of `word` (n <= word.size()).
bool ends_with_prefix(const std::vector<int32_t>& history, const std::vector<int32_t>& word, size_t n);

// Bad words: a one-token word is always banned; an n-token word bans its last token only when
// the row's history (prompt + generated, already following beam parents) ends with its first n-1
// tokens. Banned logits become -inf. Id 0 and ids outside [0, vocab) are never banned (FT kernel).
// The id that `word` bans given `history` (the rule of ban_bad_words), or -1 when it bans none.
int32_t banned_by_word(const std::vector<int32_t>& history, const std::vector<int32_t>& word, int64_t vocab);

void ban_bad_words(float* logits, int64_t vocab, const std::vector<int32_t>& history,
                   const TokenWords& bad_words);

// Temperature: l * (1 / (T + 1e-6)), skipped when T == 1.
void apply_temperature(float* logits, int64_t vocab, double temperature);

// The three penalties of SamplingConfig, as TensorRT-LLM's penaltyKernels.cu applies them to an id
// the history holds n > 0 times, in fp32: repetition (l < 0 ? l * rp : l / rp) when rp != 1, then
// presence (l - pp) when pp != 0, then frequency (l - fp * n, the product rounded first) when fp != 0.
struct Penalties {
  double repetition = 1.0, presence = 0.0, frequency = 0.0;
  bool any() const { return repetition != 1.0 || presence != 0.0 || frequency != 0.0; }
};
Penalties penalties_of(const SamplingConfig& config);
float penalized(float logit, const Penalties& p, int32_t count);

// Counts of each id in a history; scratch of at least `vocab` entries, all zero on entry and on return.
using TokenCounts = std::vector<int32_t>;

// The penalties over the ids of `history` (prompt + generated), each with its count there.
void apply_penalties(float* logits, int64_t vocab, const std::vector<int32_t>& history, const Penalties& p,
                     TokenCounts& counts);

// apply_penalties over `n` distinct ids in [0, vocab) with their counts (no history).
void apply_penalty_to_ids(float* logits, const int32_t* ids, const int32_t* counts, int64_t n, const Penalties& p);

// NaN -> -inf (the selection relies on a strict order).
void replace_nan(float* logits, int64_t vocab);

// Whether the row holds a NaN or +Inf. The model's logits never do unless its activations
// overflowed (finite but huge weights, fp16's range): the decoder then draws nothing and ends the
// request with FinishReason::kNonFiniteLogits instead of picking token 0 among -infs. A -Inf logit
// is a token that can never be drawn (a ban), which a caller may set; it is not an overflow.
bool overflowed(const float* logits, int64_t vocab);

// min_length: end_id's logit becomes -FLT_MAX while generated < min_length.
void apply_min_length(float* logits, int64_t vocab, int32_t end_id, int64_t generated,
                      int64_t min_length);

// The whole pre-sampling pipeline for one row, in FT's order. `history` is prompt + generated for
// this row, `generated` how many of those tokens were generated. NaN logits are treated as -inf.
void process_logits(float* logits, int64_t vocab, const SamplingConfig& config,
                    const std::vector<int32_t>& history, int64_t generated, TokenCounts& counts);

}  // namespace ftx::decoding
