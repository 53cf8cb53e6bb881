#pragma once
// The rows' latest logits, where rank 0's decoder reads them each step (the scheduler's; one row per
// slot and beam). When this rank computes the logits itself (Engine::logits_on_this_rank: a single
// pipeline stage) they stay in the backend's memory: a decode step's rows are copied into place there
// and Decoder::step(backend, ...) draws the sampling rows' tokens with Backend::sample_rows, so only
// token ids (and log probs) cross to the host. Otherwise (pipeline stages: the last stage sends its
// logits to rank 0 over the host communicator) they are host memory and Decoder::step(float*) reads
// them. Prefill and append logits come to the host either way (once per request, not per step).
#include <cstdint>
#include <vector>

#include "lib/decoding/decoder.h"

namespace ftx {

class Engine;

class StepLogits {
 public:
  explicit StepLogits(Engine& engine);
  ~StepLogits();
  StepLogits(const StepLogits&) = delete;
  StepLogits& operator=(const StepLogits&) = delete;

  bool on_device() const { return on_device_; }
  // `rows` rows, all zero.
  void resize(int64_t rows);
  // Row `row` := `host`, vocab_size logits (a prefill's or append's result).
  void set_row(int64_t row, const float* host);
  // What Engine::decode of n rows takes as its logits argument on rank 0: null when the logits stay
  // on the device, else a host buffer [n, vocab_size].
  float* decode_target(int64_t n);
  // After that decode: row rows[i] := the decode's row i.
  void take_decode(const std::vector<int32_t>& rows);
  // The decoder's step over every row.
  const StepOutput& step(Decoder& decoder);

 private:
  Engine& engine_;
  bool on_device_;
  int64_t vocab_, stride_;   // stride_: the engine's padded vocabulary on the device, vocab_ on the host
  int64_t rows_ = 0;
  float* device_ = nullptr;  // on_device_: [rows_, stride_] in the backend's memory
  std::vector<float> host_;  // otherwise: [rows_, vocab_]
  std::vector<float> decoded_;  // host decode results [n, vocab_]
};

}  // namespace ftx
