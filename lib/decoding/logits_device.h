#pragma once
// What Decoder::step needs from the memory that holds a step's logits when they are not on the host:
// draw the sampling rows' tokens there, or bring the rows to the host (beam search). ops::Backend
// implements it (lib/ops/backend.h), so decoding/ stays below ops/ and names no backend.
#include <cstddef>
#include <cstdint>

namespace ftx::decoding {

struct RowSamplingBatch;
struct SampledToken;

class LogitsDevice {
 public:
  virtual ~LogitsDevice() = default;
  // One token per entry of batch.rows from logits [rows, stride] in this memory (Backend::sample_rows).
  virtual void sample_rows(float* logits, int64_t stride, int64_t vocab, const RowSamplingBatch& batch,
                           SampledToken* out) = 0;
  // n floats from this memory to the host.
  virtual void download(float* host_dst, const float* src, size_t n) = 0;
};

}  // namespace ftx::decoding
