#pragma once
// Generator: runs DecodeRequests through an Engine and a Decoder (lib/decoding/decoder.h) in
// batches: prefill once per request, fan its KV cache out to its beams, then lock-step decode steps
// until every row has finished. Under tensor parallelism every rank runs the engine; rank 0 alone
// runs the Decoder and broadcasts each step's tokens/parents/finished flags, so ranks never diverge.
#include <cstdint>
#include <functional>
#include <vector>

#include "lib/decoding/decoder.h"
#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"

namespace ftx {

struct GenerateOptions {
  int64_t batch_size = 0;            // requests per batch; 0: all in one batch
  int64_t max_seq_len = 0;           // KV cache length; 0: longest prompt + max_new_tokens in the batch
  bool context_embeddings = false;   // fill GenerationOutput::context_embedding
};

struct GenerationOutput {
  int64_t input_length = 0;
  RequestResult result;                  // from the Decoder (rank 0 only)
  std::vector<float> context_embedding;  // [H]: sum over prompt tokens of the last layer output
};

// One new token of one request (rank 0), as soon as it exists. With beam search the best beam may
// change its past, so `best` carries the current best beam's tokens so far.
struct StreamEvent {
  int64_t index = 0;   // request index (over all batches)
  int64_t step = 0;    // 0-based index of this new token
  int32_t token = 0;   // the new token (beam_width 1: of the request; beams: last of `best`)
  std::vector<int32_t> best;  // beams only
};
using StreamCallback = std::function<void(const StreamEvent&)>;

struct GenerateStats {
  double first_token_s = -1;   // time to first token of the first batch (prefill + first step)
  double total_s = 0;          // wall time of all batches
  double prefill_s = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;  // new tokens of the best beams (end_id included when produced)
  int64_t batches = 0;
};

class Generator {
 public:
  Generator(Engine& engine, dist::Communicator& comm, GenerateOptions options);
  // Returns one output per request in order (results filled on rank 0; other ranks get lengths
  // only). Throws Error for requests the engine cannot hold (prompt + max_new_tokens > max_seq_len).
  std::vector<GenerationOutput> run(const std::vector<DecodeRequest>& requests,
                                    const StreamCallback& on_token = nullptr);
  const GenerateStats& stats() const { return stats_; }

 private:
  void run_batch(const std::vector<DecodeRequest>& batch, int64_t first_index,
                 std::vector<GenerationOutput>& out, const StreamCallback& on_token);

  Engine& engine_;
  dist::Communicator& comm_;
  GenerateOptions opt_;
  GenerateStats stats_;
};

}  // namespace ftx
