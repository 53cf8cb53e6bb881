#pragma once
// What the scheduler (scheduler.h) hands out: a finished request's result, each new token as it is
// made, and OrderedResults, which puts the results back in input order.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/decoding/decoder.h"
#include "lib/engine/requests.h"

namespace ftx {

struct GenerationOutput {
  int64_t index = 0;
  uint64_t fingerprint = 0;
  ResultOptions output;
  int64_t input_length = 0;              // the round's new tokens (a session's context not counted)
  RequestResult result;                  // from the Decoder
  std::vector<float> context_embedding;  // [H]: sum over the tokens run of the last layer output
  std::vector<float> context_log_probs;  // ResultOptions::context_log_probs: [input_length - 1]
  std::string session;
  int64_t round = 0;                     // 1-based round of the session (0: none)
  int64_t context_length = 0;            // tokens of the session before this round's new ones
  std::string error;                     // SchedulerOptions::refuse_alone: why it did not run (no result)
};

// One new token of one request (rank 0), as soon as it exists. With beam search the best beam may
// change its past, so `best` carries the current best beam's tokens so far.
struct StreamEvent {
  int64_t index = 0;   // request index
  int64_t step = 0;    // 0-based index of this new token
  int32_t token = 0;   // the new token (beam_width 1: of the request; beams: last of `best`)
  std::vector<int32_t> best;  // beams only
};
using StreamCallback = std::function<void(const StreamEvent&)>;
using ResultCallback = std::function<void(GenerationOutput&&)>;

// Restores input order: results arrive in completion order and leave in index order, starting
// from `first` (the number of results a resumed run already has).
class OrderedResults {
 public:
  using Sink = std::function<void(GenerationOutput&&)>;
  OrderedResults(int64_t first, Sink sink) : next_(first), sink_(std::move(sink)) {}
  void add(GenerationOutput&& out);
  int64_t next() const { return next_; }
  size_t pending() const { return pending_.size(); }

 private:
  int64_t next_;
  Sink sink_;
  std::map<int64_t, GenerationOutput> pending_;
};

}  // namespace ftx
