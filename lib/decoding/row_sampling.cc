#include "lib/decoding/row_sampling.h"

#include <algorithm>
#include <cfloat>
#include <limits>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "formats/error.h"
#include "lib/decoding/logit_processing.h"

namespace ftx::decoding {

void add_row_sampling(RowSamplingBatch& batch, int64_t row, int64_t vocab, const SamplingConfig& config,
                      const SamplingMode& mode, double top_p, double u, const std::vector<int32_t>& history,
                      int64_t generated, std::vector<int32_t>& counts) {
  RowSampling r;
  r.row = row;
  r.temperature = config.temperature;
  r.repetition_penalty = config.repetition_penalty;
  r.presence_penalty = config.presence_penalty;
  r.frequency_penalty = config.frequency_penalty;
  r.mode = mode;
  r.top_p = top_p;
  r.u = u;
  r.log_probs = config.return_log_probs;
  std::vector<int32_t>& ids = batch.ids;
  r.banned_offset = static_cast<int64_t>(ids.size());
  for (const auto& word : config.bad_words) {
    const int32_t banned = banned_by_word(history, word, vocab);
    if (banned >= 0) ids.push_back(banned);
  }
  r.banned_count = static_cast<int64_t>(ids.size()) - r.banned_offset;
  r.penalized_offset = static_cast<int64_t>(ids.size());
  // process_logits' rule: penalties once the row holds 2+ tokens, over its distinct ids and their counts.
  if (history.size() > 1 && penalties_of(config).any()) {
    for (int32_t id : history)
      if (id >= 0 && id < vocab && counts[id]++ == 0) ids.push_back(id);
    const int64_t end = static_cast<int64_t>(ids.size());
    for (int64_t i = r.penalized_offset; i < end; ++i) {
      ids.push_back(counts[ids[i]]);
      counts[ids[i]] = 0;
    }
    r.penalized_count = end - r.penalized_offset;
  }
  if (generated < config.min_length && config.end_id >= 0 && config.end_id < vocab) r.min_length_id = config.end_id;
  batch.rows.push_back(r);
}

int64_t logit_rows_read(const RowSamplingBatch& batch) {
  int64_t rows = 0;
  for (const RowSampling& r : batch.rows) {
    if (r.row < 0) throw Error("sample_rows: row " + std::to_string(r.row) + " is negative");
    rows = std::max(rows, r.row + 1);
  }
  std::vector<uint8_t> named(static_cast<size_t>(rows), 0);
  for (const RowSampling& r : batch.rows) {
    if (named[r.row]) throw Error("sample_rows: row " + std::to_string(r.row) + " is named twice");
    named[r.row] = 1;
  }
  return rows;
}

void process_row_logits(float* logits, int64_t vocab, const RowSampling& r, const int32_t* ids) {
  replace_nan(logits, vocab);
  for (int64_t i = 0; i < r.banned_count; ++i) logits[ids[r.banned_offset + i]] = -std::numeric_limits<float>::infinity();
  apply_temperature(logits, vocab, r.temperature);
  apply_penalty_to_ids(logits, ids + r.penalized_offset, ids + r.penalized_offset + r.penalized_count, r.penalized_count,
                       {r.repetition_penalty, r.presence_penalty, r.frequency_penalty});
  if (r.min_length_id >= 0) logits[r.min_length_id] = -FLT_MAX;
}

void sample_rows_on_host(float* logits, int64_t stride, int64_t vocab, const RowSamplingBatch& batch,
                         SampledToken* out) {
  logit_rows_read(batch);
  const int64_t n = static_cast<int64_t>(batch.rows.size());
  int threads = 1;
#ifdef _OPENMP
  // Threads only pay off when there is real work per step (large vocab or many rows).
  if (n * vocab >= (int64_t{1} << 16)) threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
#endif
  // Rows are independent (each has its own uniform), so the result does not depend on the threads.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t i = 0; i < n; ++i) {
    thread_local SamplingWorkspace ws;  // kept between steps: a step allocates nothing
    const RowSampling& r = batch.rows[i];
    float* l = logits + r.row * stride;
    const bool bad = overflowed(l, vocab);
    process_row_logits(l, vocab, r, batch.ids.data());
    out[i] = sample(l, vocab, r.mode, r.top_p, r.u, ws, r.log_probs);
    out[i].nonfinite = bad;
  }
}

}  // namespace ftx::decoding
