#pragma once
// What Backend::sample_rows (lib/ops/backend.h) needs to draw one token for a sampling row, resolved
// on the host from the decoder's state: the request's parameters, the ids its history bans or
// penalises, and the row's uniform from its own RequestRng. Nothing here depends on the history
// any more, so a device can run the whole pipeline on logits it already holds and send back only
// token ids (and log probs). beam search rows do not go through this.
//
// The arithmetic, per row, is exactly the CPU decoder's (logit_processing.h, sampling.h):
//  1. NaN -> -inf; ids in `banned` -> -inf (bad words, resolved on the history);
//  2. temperature: l · (1.0f / (float(T) + 1e-6f)), skipped when T == 1;
//  3. over the distinct ids in `penalized` (empty unless the history holds 2+ tokens), each held n
//     times by the history: repetition (l < 0 ? l · rp : l / rp) when rp != 1, then presence
//     (l - pp) when pp != 0, then frequency (l - fp · n) when fp != 0, in fp32 (penalized());
//  4. min_length_id (when >= 0) -> -FLT_MAX;
//  5. sample(mode, top_p, u, log_probs): top-k (greedy is k = 1) or top-p, ties to the lower id.
#include <cstdint>
#include <vector>

#include "lib/decoding/decoder.h"
#include "lib/decoding/sampling.h"

namespace ftx::decoding {

struct RowSampling {
  int64_t row = 0;  // which row of the logits buffer
  double temperature = 1.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  int32_t min_length_id = -1;  // < 0: none
  // Slices of RowSamplingBatch::ids.
  int64_t banned_offset = 0, banned_count = 0;  // may repeat ids
  // penalized_count distinct ids in [0, vocab), then as many counts: ids[penalized_offset +
  // penalized_count + j] is how often the history holds ids[penalized_offset + j].
  int64_t penalized_offset = 0, penalized_count = 0;
  SamplingMode mode;
  double top_p = 1.0;  // the p of this draw (mode.top_p, or the top-p layer's decayed nucleus)
  double u = 1.0;      // in (0, 1], the row's next RequestRng::uniform()
  bool log_probs = true;  // top-k: also the full-vocab log_prob (sample()'s full_log_prob)
};

struct RowSamplingBatch {
  std::vector<RowSampling> rows;
  std::vector<int32_t> ids;  // banned and penalised ids (and the penalised ids' counts) of every row
  void clear() {
    rows.clear();
    ids.clear();
  }
};

// Resolves one row (config as Decoder::add left it: temperature 0 already turned into greedy) and
// appends it to `batch`. `counts`: logit_processing.h's TokenCounts scratch.
void add_row_sampling(RowSamplingBatch& batch, int64_t row, int64_t vocab, const SamplingConfig& config,
                      const SamplingMode& mode, double top_p, double u, const std::vector<int32_t>& history,
                      int64_t generated, std::vector<int32_t>& counts);

// The logit rows a batch reads (its largest row + 1). Error when a row is negative or named twice
// (each entry processes its row in place, so two entries of one row would race on a device).
int64_t logit_rows_read(const RowSamplingBatch& batch);

// Steps 1-4 on one row of `vocab` logits (the CPU twin of the device's logit processing).
void process_row_logits(float* logits, int64_t vocab, const RowSampling& r, const int32_t* ids);

// The whole of sample_rows on host logits [.., stride] (the first `vocab` columns of each row are
// read; processed in place): out[i] is batch.rows[i]'s token.
void sample_rows_on_host(float* logits, int64_t stride, int64_t vocab, const RowSamplingBatch& batch,
                         SampledToken* out);

}  // namespace ftx::decoding
