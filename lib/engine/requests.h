#pragma once
// What the scheduler (scheduler.h) runs: requests, each a DecodeRequest with its place in the
// input, its result options and its session, and the sources they are pulled from.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/decoding/decoder.h"

namespace ftx {

// What a result line carries besides the tokens (per request; flags give the defaults).
struct ResultOptions {
  bool log_probs = false;      // output_log_probs
  bool cum_log_probs = false;  // cum_log_prob
  bool context_log_probs = false;  // context_log_probs: the prompt scored (Engine's ContextScores)
  bool echo = false;           // input_prompt, generated_text, generated_tokens (Megatron Core's names)
  // context_embedding: the sum of the last layer's outputs over the prompt's tokens run (FT's
  // is_return_context_embeddings); such a prompt takes nothing from the prefix cache.
  bool context_embedding = false;
  int32_t end_id = -1;         // trailing end_ids are left out of the decoded "text"
  std::string id;              // the request's JSON "id" as JSON text ("": none), copied to its result
  std::string prompt;          // echo: the prompt's text (input_prompt)
};

// FT's request_prompt_embedding of request_prompt_type 1 (a soft prompt): rows embedded at
// positions 0 .. rows-1 ahead of the prompt's ids, as inputs_embeds are. They travel as the
// virtual ids first_id .. first_id + rows - 1, numbered by the request reader so that no two
// requests share one (the prefix cache keys slots by id); every rank's engine holds the rows while
// the request runs (Engine::add_soft_prompt).
struct SoftPrompt {
  int32_t first_id = 0;
  int64_t rows = 0;
  std::vector<float> values;  // [rows, hidden]
};

struct Request {
  int64_t index = 0;         // position in the input, 0-based: results are reported with it
  DecodeRequest decode;      // a session round: decode.input_ids are the round's new tokens
  ResultOptions output;
  uint64_t fingerprint = 0;  // identifies the request for --resume; carried to the result
  std::string session;       // "" : not part of a session
  bool session_end = false;  // the session's last round: its cache and context are freed after it
  SoftPrompt soft_prompt;    // rows > 0: decode.input_ids start with its ids
  // A control request (index < 0, no tokens, session_end): ends `session` without a round.
  bool is_control() const { return index < 0; }
};

// Pulled on rank 0 only. peek() may throw Error (a malformed input line): the scheduler turns it
// into the same error on every rank.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The next request, not yet consumed; nullptr when there is none now.
  virtual const Request* peek() = 0;
  virtual Request take() = 0;  // consumes the request peek() returned
  // No request will ever come again. A file is finished once peek() returns nullptr; an
  // interactive source (ftx chat) returns nullptr from peek() while a round is running and blocks
  // in peek() for the next line only when none is.
  virtual bool finished() { return peek() == nullptr; }
};

// Requests held in memory (tests, benches, eval).
class VectorSource : public RequestSource {
 public:
  explicit VectorSource(std::vector<Request> requests) : requests_(std::move(requests)) {}
  const Request* peek() override { return next_ < requests_.size() ? &requests_[next_] : nullptr; }
  Request take() override { return std::move(requests_[next_++]); }

 private:
  std::vector<Request> requests_;
  size_t next_ = 0;
};

}  // namespace ftx
