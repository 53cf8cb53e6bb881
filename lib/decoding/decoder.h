#pragma once
// Decoder: everything between a step's logits and the next tokens, for one batch of requests
// (FT's DynamicDecodeLayer + BeamSearchLayer + stop criteria). Device-neutral: it sees fp32 logits
// on the host. The generator (lib/engine) runs the model on every row, calls step(), and reorders
// its KV cache by `parents` when beams are used.
//
// Rows: request b, beam k is row b * beam_width + k. beam_width is one value for the whole batch
// (as in FT); a request's own beam_width must equal it.
#include <cstdint>
#include <string>
#include <vector>

namespace ftx {

struct SamplingConfig {
  int64_t top_k = 0;                    // 0 and top_p 0: greedy
  double top_p = 0.0;
  // Factual nucleus (top-p layer only, i.e. top_k 0): after each draw p <- max(p * decay, min),
  // back to top_p when the drawn id is top_p_reset_id. decay or min outside (0, 1] fall back to
  // FT's 1.0 / 0.5.
  double top_p_decay = 1.0;
  double top_p_min = 1e-6;
  int32_t top_p_reset_id = -1;
  double temperature = 1.0;
  double repetition_penalty = 1.0;      // exclusive with presence_penalty (both set: Error)
  double presence_penalty = 0.0;
  double len_penalty = 0.0;             // beam search: score = cum / len^len_penalty
  int64_t min_length = 0;               // end_id banned until this many tokens are generated
  int64_t beam_width = 1;
  double beam_search_diversity_rate = 0.0;
  uint64_t seed = 0;                    // per-request RNG: same seed, same samples, whatever the batch
  int32_t end_id = -1;
  std::vector<std::vector<int32_t>> stop_words;  // each word: a token sequence
  std::vector<std::vector<int32_t>> bad_words;
  bool return_log_probs = false;        // output_log_probs, and cum_log_prob when sampling
};

struct DecodeRequest {
  std::vector<int32_t> input_ids;       // the prompt (non-empty)
  int64_t max_new_tokens = 0;
  SamplingConfig sampling;
};

enum class FinishReason { kNone, kLength, kEndId, kStopWords };
const char* finish_reason_name(FinishReason r);  // "length", "end_id", "stop_words"

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
  std::vector<bool> finished;           // [rows] row finished (after this step)
};

class Decoder {
 public:
  // vocab_size: logits width (padding columns beyond the real vocab are never chosen).
  Decoder(std::vector<DecodeRequest> requests, int64_t vocab_size);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  int64_t batch_size() const;
  int64_t beam_width() const;
  int64_t rows() const { return batch_size() * beam_width(); }
  // logits: [rows, vocab_size] fp32, row-major; modified in place (penalties, bans, temperature).
  // The first call takes the logits of each prompt's last position (beams of one request share it).
  const StepOutput& step(float* logits);
  bool all_finished() const;
  // Tokens generated so far for request b's current best beam (for streaming).
  std::vector<int32_t> current_best(int64_t b) const;
  std::vector<RequestResult> results() const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace ftx
