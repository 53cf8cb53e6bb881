// decode(): one token for each row, at the row's next position. Each step runs the same ops on the
// same buffers, so a backend may record it once and replay it (ops::RepeatableStep). See engine.h.
#include "lib/engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/error.h"

namespace ftx {

void Engine::decode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& cache_rows, float* logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return;
  FTX_CHECK(static_cast<int64_t>(cache_rows.size()) == n, "", "decode: one cache row per token");
  std::vector<int32_t> positions(static_cast<size_t>(n)), slots(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t row = cache_rows[i];
    FTX_CHECK(row >= 0 && row < rows_, "", "decode: cache row out of range");
    const kv::BlockTable& t = kv_->table(row);
    FTX_CHECK(memory_len_ > 0 || t.slots < max_seq_, "",
              "decode: row " + std::to_string(row) + " reached the KV cache length " + std::to_string(max_seq_));
    slots[i] = static_cast<int32_t>(t.slots);
    positions[i] = static_cast<int32_t>(t.slots - t.prefix);  // a prefix takes slots, not positions
    check_positions(positions[i], positions[i]);
  }
  FTX_CHECK(n <= rows_, "", "decode of " + std::to_string(n) + " rows exceeds the reserved " + std::to_string(rows_));
  prepare_writes(cache_rows, std::vector<int64_t>(static_cast<size_t>(n), 1));
  const int64_t mb = micro_batch_rows(n);
  for (int64_t i0 = 0; i0 < n; i0 += mb)
    decode_batch(tokens.data() + i0, cache_rows.data() + i0, positions.data() + i0, slots.data() + i0,
                 std::min(mb, n - i0), i0);
  deliver_logits(n, logits);
}

void Engine::decode_batch(const int32_t* tokens, const int32_t* cache_rows, const int32_t* positions,
                          const int32_t* slots, int64_t n, int64_t first) {
  // A decode step of n rows repeats the same ops on the same buffers; only ids, positions and
  // block tables change. The key names this engine's buffers (generation), n and where its logits
  // go. Generated tokens are real (< vocab_size) even when prompt_learning_start_id lies inside the
  // vocabulary; a virtual token reaches decode only from a wrapping append (append_stepwise), whose
  // step is not a repeat.
  const int64_t virtual_from = std::max<int64_t>(prompt_start_, cfg_.vocab_size);
  const std::vector<int32_t> tables = block_tables(cache_rows, n);
  const ops::BlockTables bt{tables.data(), stride_};
  // A mixture-of-experts step is not: its experts' GEMMs are sized by the routing of its tokens.
  std::unique_ptr<ops::RepeatableStep> step;
  if (!has_virtual(tokens, n, virtual_from) && cfg_.expert_num == 0)
    step = std::make_unique<ops::RepeatableStep>(be_, "engine " + std::to_string(reinterpret_cast<uintptr_t>(this)) +
                                                          " generation " + std::to_string(generation_) + " decode " +
                                                          std::to_string(n) + " at " + std::to_string(first));
  stage_input(tokens, positions, n, virtual_from);
  run_layers(n, std::vector<int32_t>(positions, positions + n), [&](int64_t l) {
    be_.decode_attention(attn_, qkv_, n, bt, slots, pool_->k(l), pool_->v(l), shape_);
  });
  stage_output(n);
  compute_logits(x_, n, first);
  if (step) step->finish();
  for (int64_t i = 0; i < n; ++i) kv_->commit(cache_rows[i], tokens + i, 1);
}

}  // namespace ftx
