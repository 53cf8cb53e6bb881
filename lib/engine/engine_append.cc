// prefill() and append(): tokens after the ends of their rows, run as one right-padded batch (in
// micro-batches under pipeline parallelism); a prefill first takes the blocks the prefix cache
// holds for its rows' tokens. See engine.h.
#include "lib/engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/error.h"

namespace ftx {

void Engine::prefill(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& cache_rows,
                     float* logits, std::vector<float>* context_embeddings, ContextScores* scores) {
  const int64_t B = static_cast<int64_t>(prompts.size());
  FTX_CHECK(static_cast<int64_t>(cache_rows.size()) == B, "", "prefill: one cache row per prompt");
  for (int32_t row : cache_rows) FTX_CHECK(row >= 0 && row < rows_, "", "prefill: cache row out of range");
  release_rows(cache_rows);
  // Each row first takes the full blocks the prefix cache holds for its tokens (not the block of
  // its last token, whose logits are wanted), if the pool can hold the rest. A scored row takes
  // none: every token's logits are wanted.
  const bool share = kv_->sharing() && !context_embeddings;
  if (scores) FTX_CHECK(static_cast<int64_t>(scores->want.size()) == B, "", "prefill: one score flag per prompt");
  std::vector<int64_t> held(static_cast<size_t>(B), 0);
  if (share) {
    const int64_t need = prefill_blocks(prompts, scores ? &scores->want : nullptr);
    FTX_CHECK(need <= kv_->available(), "", "KV cache: a prefill of " + std::to_string(B) + " rows needs " +
                                                std::to_string(need) + " blocks, " + std::to_string(kv_->available()) +
                                                " are free (raise --kv-cache-memory)");
    for (int64_t b = 0; b < B; ++b) {
      if (scores && scores->want[b]) continue;
      const std::vector<int32_t> keys = slot_keys(prompts[b]);
      held[b] = kv_->attach(cache_rows[b], keys, static_cast<int64_t>(keys.size()) - 1);
      tokens_reused_ += held[b];
    }
  }
  std::vector<std::vector<int32_t>> rest;
  for (int64_t b = 0; b < B; ++b) rest.push_back(place_prefix(prompts[b], cache_rows[b], held[b]));
  append_rows(rest, cache_rows, logits, context_embeddings, scores);
}

void Engine::append(const std::vector<std::vector<int32_t>>& all_tokens, const std::vector<int32_t>& cache_rows,
                    float* logits, std::vector<float>* context_embeddings, ContextScores* scores) {
  const int64_t B = static_cast<int64_t>(all_tokens.size());
  FTX_CHECK(static_cast<int64_t>(cache_rows.size()) == B, "", "append: one cache row per token list");
  // Prefix prompts: a leading task marker becomes K/V in the cache, the rest runs as usual.
  std::vector<std::vector<int32_t>> stripped;
  if (!prefix_kv_.empty())
    for (int64_t b = 0; b < B; ++b) {
      FTX_CHECK(cache_rows[b] >= 0 && cache_rows[b] < rows_, "", "append: cache row out of range");
      stripped.push_back(place_prefix(all_tokens[b], cache_rows[b]));
    }
  append_rows(prefix_kv_.empty() ? all_tokens : stripped, cache_rows, logits, context_embeddings, scores);
}

void Engine::append_rows(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
                         float* logits, std::vector<float>* context_embeddings, ContextScores* scores) {
  const int64_t B = static_cast<int64_t>(tokens.size());
  check_scored(tokens, scores);
  bool wraps = false;
  std::vector<int64_t> n(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = tokens[b];
    const int32_t row = cache_rows[b];
    FTX_CHECK(!p.empty(), "", "append: no tokens");
    FTX_CHECK(row >= 0 && row < rows_, "", "append: cache row out of range");
    const kv::BlockTable& t = kv_->table(row);
    const int64_t end = t.slots + static_cast<int64_t>(p.size());
    if (memory_len_ > 0) {
      wraps |= end > memory_len_;
    } else {
      FTX_CHECK(end <= max_seq_, "", "row " + std::to_string(row) + " would hold " + std::to_string(end) +
                                         " tokens, more than the KV cache's " + std::to_string(max_seq_));
    }
    check_positions(t.slots - t.prefix, end - 1 - t.prefix);
    n[b] = static_cast<int64_t>(p.size());
  }
  if (wraps) {
    // Positions that wrap a circular cache would overwrite keys that earlier queries of the same
    // append still need: feed them one at a time (FT's continue_gen does the same).
    append_stepwise(tokens, cache_rows, logits, scores);
    return;
  }
  FTX_CHECK(B <= rows_, "", "append of " + std::to_string(B) + " rows exceeds the reserved " + std::to_string(rows_));
  prepare_writes(cache_rows, n);
  if (context_embeddings) context_embeddings->assign(static_cast<size_t>(B * H_), 0.0f);
  const int64_t mb = micro_batch_rows(B);
  for (int64_t b0 = 0; b0 < B; b0 += mb) {
    const int64_t b1 = std::min(B, b0 + mb);
    if (b0 == 0 && b1 == B) {
      append_batch(tokens, cache_rows, 0, context_embeddings ? context_embeddings->data() : nullptr, scores);
      continue;
    }
    const std::vector<std::vector<int32_t>> sub(tokens.begin() + b0, tokens.begin() + b1);
    const std::vector<int32_t> rows(cache_rows.begin() + b0, cache_rows.begin() + b1);
    append_batch(sub, rows, b0, context_embeddings ? context_embeddings->data() + b0 * H_ : nullptr, scores);
  }
  deliver_context_embeddings(context_embeddings);
  deliver_scores(scores);
  deliver_logits(B, logits);
}

void Engine::append_batch(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
                          int64_t first, float* context_embeddings, ContextScores* scores) {
  const int64_t B = static_cast<int64_t>(tokens.size());
  int64_t S = 0;
  for (const auto& p : tokens) S = std::max<int64_t>(S, static_cast<int64_t>(p.size()));
  const int64_t n = B * S;
  FTX_CHECK(n <= max_tokens_, "", "append of " + std::to_string(n) + " tokens exceeds the reserved workspace");
  std::vector<int32_t> ids(static_cast<size_t>(n), 0), positions(static_cast<size_t>(n), 0), lengths(B), past(B);
  bool any_past = false;
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = tokens[b];
    const kv::BlockTable& t = kv_->table(cache_rows[b]);
    lengths[b] = static_cast<int32_t>(p.size());
    past[b] = static_cast<int32_t>(t.slots);
    any_past |= past[b] > 0;
    for (int64_t s = 0; s < S; ++s) {
      // Right padding: pads repeat id 0 at the next position and are masked out of attention.
      ids[b * S + s] = s < lengths[b] ? p[s] : 0;
      positions[b * S + s] = static_cast<int32_t>(past[b] - t.prefix + s);
    }
  }
  const std::vector<int32_t> tables = block_tables(cache_rows.data(), B);
  const ops::BlockTables bt{tables.data(), stride_};
  stage_input(ids.data(), positions.data(), n, prompt_start_);
  run_layers(n, positions, [&](int64_t l) {
    be_.context_attention(attn_, qkv_, B, S, lengths.data(), bt, pool_->k(l), pool_->v(l), shape_,
                          any_past ? past.data() : nullptr);
  });
  stage_output(n);
  for (int64_t b = 0; b < B; ++b) {
    kv_->commit(cache_rows[b], tokens[b].data(), lengths[b]);
    tokens_computed_ += lengths[b];
  }
  if (!par_.layout().last_stage()) return;
  if (context_embeddings) {
    std::vector<float> host(static_cast<size_t>(n * H_));
    be_.download_act(host.data(), x_, host.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < lengths[b]; ++t)
        for (int64_t i = 0; i < H_; ++i) context_embeddings[b * H_ + i] += host[(b * S + t) * H_ + i];
  }
  for (int64_t b = 0; b < B; ++b)
    be_.copy_act(last_ + b * H_, x_ + (b * S + lengths[b] - 1) * H_, static_cast<size_t>(H_));
  score_batch(tokens, S, first, scores);  // after the copies: it norms x_ in place
  compute_logits(last_, B, first);
}

void Engine::append_stepwise(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
                             float* logits, ContextScores* scores) {
  const int64_t B = static_cast<int64_t>(tokens.size());
  const int64_t V = cfg_.vocab_size;
  const bool leader = comm_.rank() == 0 && (logits || scores);
  std::vector<float> step_logits(leader ? static_cast<size_t>(B * V) : 0);
  size_t longest = 0;
  for (const auto& t : tokens) longest = std::max(longest, t.size());
  for (size_t i = 0; i < longest; ++i) {
    std::vector<int32_t> feed, rows, which;
    for (int64_t b = 0; b < B; ++b)
      if (i < tokens[b].size()) {
        feed.push_back(tokens[b][i]);
        rows.push_back(cache_rows[b]);
        which.push_back(static_cast<int32_t>(b));
      }
    decode(feed, rows, leader ? step_logits.data() : nullptr);
    if (!leader) continue;
    // Each row's logits are those after its own last token; a scored row's next token is scored
    // from each step's.
    for (size_t j = 0; j < which.size(); ++j) {
      const auto& t = tokens[which[j]];
      const float* row = step_logits.data() + static_cast<int64_t>(j) * V;
      if (i + 1 == t.size() && logits) std::copy_n(row, V, logits + static_cast<int64_t>(which[j]) * V);
      if (i + 1 < t.size() && scores && scores->want[which[j]])
        ops::host_token_log_probs(row, 1, V, V, &t[i + 1], &scores->log_probs[which[j]][i]);
    }
  }
}

}  // namespace ftx
