// CudaBackend::sample_rows and token_log_probs. sample_rows: packs each row's parameters as the CPU computes them (the inverse
// temperature, the penalties as floats and whether they apply), stages them with the banned and
// penalised ids, runs the sampling room's kernel on the logits where they are and downloads only
// the per-row results (24 bytes a row).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/sampling/log_prob_kernels.h"
#include "kernels/sampling/sampling_kernels.h"

namespace ftx::cuda {

void CudaBackend::sample_rows(float* logits, int64_t stride, int64_t vocab, const decoding::RowSamplingBatch& batch,
                              decoding::SampledToken* out) {
  check_not_in_step("sample_rows");
  const int64_t n = static_cast<int64_t>(batch.rows.size());
  if (n == 0) return;
  if (batch.ids.size() > static_cast<size_t>(INT32_MAX))
    throw Error("sample_rows: " + std::to_string(batch.ids.size()) + " banned and penalised ids (at most 2^31 - 1)");
  decoding::logit_rows_read(batch);  // each row once (blocks process their rows in place)
  std::vector<DeviceRowSampling> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const decoding::RowSampling& r = batch.rows[i];
    DeviceRowSampling& d = rows[i];
    d.top_p = r.top_p;
    d.u = r.u;
    d.row = r.row;
    d.banned_offset = static_cast<int32_t>(r.banned_offset);
    d.banned_count = static_cast<int32_t>(r.banned_count);
    d.penalized_offset = static_cast<int32_t>(r.penalized_offset);
    d.penalized_count = static_cast<int32_t>(r.penalized_count);
    // apply_temperature and apply_repetition_penalty's float operands, computed the same way.
    d.apply_temperature = r.temperature != 1.0;
    d.inv_temperature = 1.0f / (static_cast<float>(r.temperature) + 1e-6f);
    d.apply_repetition = r.repetition_penalty != 1.0;
    d.apply_presence = r.presence_penalty != 0.0;
    d.apply_frequency = r.frequency_penalty != 0.0;
    d.repetition_penalty = static_cast<float>(r.repetition_penalty);
    d.presence_penalty = static_cast<float>(r.presence_penalty);
    d.frequency_penalty = static_cast<float>(r.frequency_penalty);
    d.min_length_id = r.min_length_id;
    d.top_p_mode = r.mode.kind == decoding::SamplingMode::kTopP;
    d.top_k = static_cast<int32_t>(std::clamp<int64_t>(r.mode.top_k, 1, std::min<int64_t>(vocab, kMaxTopK)));
    d.log_probs = r.log_probs;
  }
  const std::vector<const void*> staged =
      stage({{rows.data(), rows.size() * sizeof(DeviceRowSampling)}, {batch.ids.data(), batch.ids.size() * sizeof(int32_t)}});
  static_assert(sizeof(DeviceSampledToken) % sizeof(float) == 0, "results travel as floats");
  constexpr size_t kFloatsPerRow = sizeof(DeviceSampledToken) / sizeof(float);
  float* results = scratch(static_cast<size_t>(n) * kFloatsPerRow);
  invoke_sample_rows(stream_, logits, stride, vocab, static_cast<const DeviceRowSampling*>(staged[0]), n,
                     static_cast<const int32_t*>(staged[1]), reinterpret_cast<DeviceSampledToken*>(results));
  std::vector<DeviceSampledToken> host(static_cast<size_t>(n));
  download(reinterpret_cast<float*>(host.data()), results, host.size() * kFloatsPerRow);
  for (int64_t i = 0; i < n; ++i) {
    out[i].token = host[i].token;
    out[i].log_prob = host[i].log_prob;
    out[i].output_log_prob = host[i].output_log_prob;
    out[i].nonfinite = host[i].nonfinite != 0;
  }
}

void CudaBackend::token_log_probs(const float* logits, int64_t rows, int64_t stride, int64_t vocab,
                                  const int32_t* targets, float* out) {
  check_not_in_step("token_log_probs");
  if (rows == 0) return;
  ops::check_log_prob_targets(targets, rows, vocab);
  const std::vector<const void*> staged = stage({{targets, static_cast<size_t>(rows) * sizeof(int32_t)}});
  float* results = scratch(static_cast<size_t>(rows));
  invoke_token_log_probs(stream_, logits, rows, stride, vocab, static_cast<const int32_t*>(staged[0]), results);
  download(out, results, static_cast<size_t>(rows));
}

}  // namespace ftx::cuda
