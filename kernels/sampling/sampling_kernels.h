#pragma once
// Sampling room: Backend::sample_rows on the device (lib/decoding/row_sampling.h defines the
// arithmetic; decoding::sample_rows_on_host is the CPU twin tests/unit/cuda_sampling_test.cc
// compares against, label gpu). Launcher conventions: kernels/norms/norm_kernels.h.
//
// Hand-written rather than FlashInfer's sampling: FlashInfer draws top-k/top-p by rejection
// sampling with its own uniforms (several per row, from a Philox state) and renormalises in fp32,
// so neither its random stream nor its arithmetic can give the CPU decoder's token for the same
// request; here each row takes the one uniform the host drew from the request's RequestRng and
// walks the same sorted order, in double where the CPU uses double.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ftx::cuda {

// One row's parameters, packed by the backend from a decoding::RowSampling (temperature inverse,
// penalty floats and their on/off flags already computed on the host exactly as the CPU does).
struct DeviceRowSampling {
  double top_p = 1.0;
  double u = 1.0;
  int64_t row = 0;
  int32_t banned_offset = 0, banned_count = 0;
  int32_t penalized_offset = 0, penalized_count = 0;  // the ids, then their counts (RowSampling's)
  float inv_temperature = 1.0f;
  float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  int32_t apply_temperature = 0, apply_repetition = 0, apply_presence = 0, apply_frequency = 0;
  int32_t min_length_id = -1;
  int32_t top_p_mode = 0;  // 0: top-k (greedy: k = 1), 1: top-p over the vocab
  int32_t top_k = 1;       // top-k mode: 1..1024, <= vocab
  int32_t log_probs = 0;   // top-k mode: also the full-vocab log_prob
};

struct DeviceSampledToken {
  double log_prob = 0.0;
  double output_log_prob = 0.0;
  int32_t token = 0;
  int32_t nonfinite = 0;  // the row held a NaN or +Inf before processing (SampledToken::nonfinite)
};

// Backend::sample_rows: one block per entry of rows[0, n); logits [.., stride] (the rows named by
// the entries are processed in place, the first `vocab` columns read); ids: the entries' banned and
// penalised ids; out[n].
void invoke_sample_rows(cudaStream_t stream, float* logits, int64_t stride, int64_t vocab,
                        const DeviceRowSampling* rows, int64_t n, const int32_t* ids, DeviceSampledToken* out);

}  // namespace ftx::cuda
