#pragma once
// Decoder: everything between a step's logits and the next tokens (FT's DynamicDecodeLayer +
// BeamSearchLayer + stop criteria), for a set of request slots. Device-neutral: it takes fp32 logits
// on the host, or in a device's memory (a LogitsDevice: the backend), where sample_rows draws the
// sampling rows' tokens (the same arithmetic; lib/decoding/row_sampling.h). The scheduler (lib/engine) runs the model on every row, calls step(), and reorders
// its KV cache by `parents` when beams are used.
//
// Slots: the decoder has `slots` request slots of `beam_width` rows each; slot s, beam k is row
// s * beam_width + k. A request joins a free slot with add() and leaves with take() once
// slot_finished(), so requests come and go while others decode (continuous batching); each keeps its
// own sampling parameters and random stream, so its tokens do not depend on its neighbours.
// beam_width is one value for the decoder (as in FT); a request's own beam_width must equal it.
#include <cstdint>
#include <string>
#include <vector>

namespace ftx {

namespace decoding {
class LogitsDevice;
}

struct SamplingConfig {
  int64_t top_k = 0;                    // 0 and top_p 0: greedy
  double top_p = 0.0;
  // Factual nucleus (top-p layer only, i.e. top_k 0): after each draw p <- max(p * decay, min),
  // back to top_p when the drawn id is top_p_reset_id (< 0: none). FT's defaults; check_decode_request
  // refuses decay or min outside (0, 1] (FT warns and falls back to 1.0 / 0.5).
  double top_p_decay = 1.0;
  double top_p_min = 1e-6;
  int32_t top_p_reset_id = -1;
  // 0 means greedy decoding (FT divides by T + 1e-6, which makes any draw the argmax); log probs
  // are then those of the unscaled logits.
  double temperature = 1.0;
  // Penalties as TensorRT-LLM's penaltyKernels.cu combines them, after temperature, on every id the
  // row's history (prompt + generated) holds, n times: repetition (l < 0 ? l * rp : l / rp), then
  // presence (l - pp), then frequency (l - fp * n). Defaults are no-ops.
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  double len_penalty = 0.0;             // beam search: score = cum / len^len_penalty
  int64_t min_length = 0;               // end_id banned until this many tokens are generated
  int64_t beam_width = 1;
  double beam_search_diversity_rate = 0.0;
  uint64_t seed = 0;                    // per-request RNG: same seed, same samples, whatever the batch
  int32_t end_id = -1;                  // < 0 or >= vocab: no end id (generation stops on length)
  std::vector<std::vector<int32_t>> stop_words;  // each word: a token sequence
  std::vector<std::vector<int32_t>> bad_words;
  bool return_log_probs = false;        // output_log_probs, and cum_log_prob when sampling
};

struct DecodeRequest {
  std::vector<int32_t> input_ids;       // the prompt (non-empty)
  int64_t max_new_tokens = 0;
  SamplingConfig sampling;
  // > vocab: input ids in [vocab, virtual_id_end) are prompt-learning virtual tokens (rows of the
  // engine's prompt tables, lib/engine/prompt_tables.h), valid in the prompt only.
  int64_t virtual_id_end = 0;
};

// FT's limits: top-k kernels take at most 1024 candidates, beam kernels 64
// beams.
constexpr int64_t kMaxTopK = 1024;
constexpr int64_t kMaxBeamWidth = 64;
// New tokens per request: FT takes a uint32 length, but no cache holds 2^24 tokens of one row; a
// larger value is a mistake (and would overflow the lengths computed from it).
constexpr int64_t kMaxNewTokens = int64_t(1) << 24;

// Throws Error (the message names the field and value, no location) when a request breaks FT's
// rules: an empty prompt or an id outside [0, vocab), max_new_tokens outside [0, kMaxNewTokens] (0: nothing to generate), top_k outside [0, 1024],
// top_p outside [0, 1], temperature < 0, repetition_penalty <= 0, min_length < 0, top_p_decay or
// top_p_min outside (0, 1], a top_p_reset_id outside [0, vocab) (-1: none),
// beam_width outside [1, 64], non-finite values. An end_id outside the vocabulary is allowed (it
// never matches). Values that would be silently ignored are errors too: min_length beyond
// max_new_tokens, top_k/top_p with beam search (which does not sample), a temperature with greedy
// decoding (top_k 0 and top_p 0), a top_p_decay other than 1 or a reset id off FT's top-p layer
// (top_k 0, top_p > 0, one beam, temperature > 0). Messages name the reset id top_p_reset_ids
// (FT's request field and the flag's name).
void check_decode_request(const DecodeRequest& request, int64_t vocab_size);

// kNonFiniteLogits: the step's logits held a NaN or +Inf (the model's activations overflowed), so
// no token was drawn there: the request ends with the tokens before that step, and its result is
// an error (the step is the number of tokens it has).
enum class FinishReason { kNone, kLength, kEndId, kStopWords, kNonFiniteLogits };
const char* finish_reason_name(FinishReason r);  // "length", "end_id", "stop_words", "non_finite_logits"

struct BeamResult {
  std::vector<int32_t> output_ids;      // new tokens only (end_id included when produced)
  double cum_log_prob = 0.0;            // sampling: only with return_log_probs (else 0); beams: always
  std::vector<float> output_log_probs;  // one per new token, when requested
  FinishReason finish_reason = FinishReason::kNone;
};

struct RequestResult {
  std::vector<BeamResult> beams;        // best first; size beam_width
};

struct StepOutput {
  std::vector<int32_t> tokens;          // [rows] token appended to each row this step
  std::vector<int32_t> parents;         // [rows] row whose history (and KV cache) this row continues
  std::vector<bool> finished;           // [rows] row finished (after this step); free slots: true
};

class Decoder {
 public:
  // `slots` free request slots of `beam_width` rows; vocab_size: logits width (padding columns
  // beyond the real vocab are never chosen).
  Decoder(int64_t slots, int64_t beam_width, int64_t vocab_size);
  // The requests in slots 0..n-1 (the beam width is the first request's).
  Decoder(std::vector<DecodeRequest> requests, int64_t vocab_size);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  int64_t batch_size() const;  // slots
  int64_t beam_width() const;
  int64_t rows() const { return batch_size() * beam_width(); }

  // Puts a request into a free slot (check_decode_request's errors, prefixed "request <slot>").
  // Its first step() takes the logits of its prompt's last position in every one of its rows.
  void add(int64_t slot, DecodeRequest request);
  bool occupied(int64_t slot) const;
  bool slot_finished(int64_t slot) const;  // every beam of the slot's request finished
  // The slot's result; frees the slot.
  RequestResult take(int64_t slot);

  // logits: [rows, vocab_size] fp32, row-major; rows of occupied slots are read and modified in
  // place (penalties, bans, temperature), the others ignored.
  const StepOutput& step(float* logits);
  // The same step on logits in `device`'s memory (the backend's), [rows, stride] (stride >=
  // vocab_size: the padded vocabulary, whose extra columns are never read). Sampling rows are drawn
  // by device.sample_rows, so only their tokens and log probs come to the host; beam search runs on
  // the host and downloads the rows. The result equals step() on the same logits.
  const StepOutput& step(decoding::LogitsDevice& device, float* logits, int64_t stride);
  bool all_finished() const;  // every occupied slot finished
  // Which beam (0..beam_width-1) of slot b is the best now: the first of results()'s beams.
  int64_t best_beam(int64_t b) const;
  // Tokens generated so far for slot b's current best beam (for streaming).
  std::vector<int32_t> current_best(int64_t b) const;
  // Results of the occupied slots, in slot order (slots stay occupied).
  std::vector<RequestResult> results() const;

  // Preemption (the scheduler's, when the KV cache runs out): a paused slot keeps its state but
  // takes no part in step() (its rows report finished, parent themselves and emit nothing) until it
  // is resumed; its next step() then takes the logits after each row's history().
  void set_paused(int64_t slot, bool paused);
  // Row r's tokens so far: the prompt and what it generated (following its beam's parents).
  const std::vector<int32_t>& history(int64_t row) const;
  bool row_finished(int64_t row) const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace ftx
