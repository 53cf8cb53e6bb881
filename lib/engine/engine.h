#pragma once
// Engine: the model forward for one TP rank on one backend: prefill of a right-padded batch, then
// one-token decode steps over a KV cache allocated once. One code path for every architecture;
// ModelConfig selects the blocks (positions, norm placement, parallel residual, MQA, activation).
//
// Cache rows: the KV cache has `rows` rows (batch · beam). prefill() fills the rows it is given;
// copy_rows()/reorder() move histories between rows (beam fan-out and beam reordering); decode()
// appends one token to each row it is given. Each row keeps its own length, so rows of different
// prompt lengths never leave gaps in the cache.
//
// Logits are computed only on rank 0 (the rank that decodes); the other ranks skip the lm_head GEMM.
#include <cstdint>
#include <vector>

#include "lib/dist/communicator.h"
#include "lib/engine/model_weights.h"
#include "lib/ops/backend.h"

namespace ftx {

class PromptTables;

struct EngineOptions {
  // > 0: every row's KV cache is circular and keeps only the last memory_len tokens (FT's
  // memory_len); positions keep counting, so a row can go on past memory_len tokens.
  int64_t memory_len = 0;
  // p-tuning tables (lib/engine/prompt_tables.h): an input id in [start_id, end_engine_id()) is
  // embedded as that row of the stacked tables, at its real position. Prefix prompts: a row's
  // first token start_id + t puts task t's K/V prefix in the row's cache instead (the prompt's
  // positions still start at 0; the cache holds max_seq tokens besides the longest prefix).
  // Uploaded by the engine; the object need not outlive the constructor.
  const PromptTables* prompts = nullptr;
};

class Engine {
 public:
  Engine(const ModelWeights& weights, ops::Backend& backend, dist::Communicator& comm, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Makes room for `rows` KV-cache rows of `max_seq` tokens and prefills of up to
  // `max_prefill_tokens` (batch · padded width) tokens. Only what is too small grows, and growing
  // keeps every row's cache and length, so the scheduler can grow while rows are decoding. Before
  // allocating, the growth is checked against the backend's available memory: Error with the
  // numbers when it does not fit.
  void reserve(int64_t rows, int64_t max_seq, int64_t max_prefill_tokens);
  // Backend bytes the cache and workspaces take at these sizes.
  int64_t bytes_for(int64_t rows, int64_t max_seq, int64_t max_prefill_tokens) const;
  int64_t rows() const { return rows_; }
  // Tokens a row holds as callers count them: a prefix prompt's slots are extra, its marker counts one.
  int64_t max_seq() const { return max_seq_ - max_prefix_; }
  int64_t vocab_size() const { return cfg_.vocab_size; }
  int64_t hidden() const { return H_; }
  int64_t row_length(int64_t row) const {
    const int64_t pre = row_prefix_[static_cast<size_t>(row)];
    return length_[static_cast<size_t>(row)] - pre + (pre > 0 ? 1 : 0);
  }

  // Runs the prompts (any lengths ≥ 1) as one right-padded batch into cache rows `cache_rows`,
  // which start empty: append() after forgetting the rows' histories.
  void prefill(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& cache_rows,
               float* logits, std::vector<float>* context_embeddings = nullptr);
  // Appends tokens[i] (≥ 1 of them) to cache row cache_rows[i] after the row's current length (its
  // positions continue from there), as one right-padded batch: a prefill that starts where the row
  // is, so the next round of a session, or a newcomer in a freed row, costs only its new tokens.
  // logits (rank 0; may be null elsewhere): [rows, V] host, after each row's last new token.
  // context_embeddings (optional): [rows, H] host, sum over the new tokens of the last layer's
  // output (before the final layernorm; padded positions excluded).
  void append(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
              float* logits, std::vector<float>* context_embeddings = nullptr);
  int64_t memory_len() const { return memory_len_; }
  // Appends tokens[i] to cache row cache_rows[i] (at position row_length) and returns the next
  // logits [n, V] (rank 0).
  void decode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& cache_rows, float* logits);
  // Row dst[i] takes row src[i]'s history (all reads before writes).
  void copy_rows(const std::vector<int32_t>& dst, const std::vector<int32_t>& src);

 private:
  // The decoder stack over `n` tokens already embedded in x_; `attend` runs the attention of
  // layer l into attn_ from qkv_.
  template <typename Attend>
  void run_layers(int64_t n, const std::vector<int32_t>& positions, Attend&& attend);
  void ffn(const LayerWeights& lw, const float* in, float* out, int64_t n);
  // Rank 0: final layernorm (in place on hidden) and lm_head into logits_; then the host copy.
  void compute_logits(float* hidden, int64_t n);
  void download_logits(int64_t n, float* logits);
  void free_buffers();
  void free_workspace();
  // Prefix prompts: when tokens[0] is a task marker, writes the task's K/V into the (empty) row
  // and drops the marker. Returns the tokens to run.
  std::vector<int32_t> place_prefix(const std::vector<int32_t>& tokens, int32_t row);
  // x_ = embeddings of ids at positions (n tokens); ids >= virtual_from are prompt-table rows.
  void embed(const int32_t* ids, const int32_t* positions, int64_t n, int64_t virtual_from);
  bool has_virtual(const int32_t* ids, int64_t n, int64_t virtual_from) const;
  // A circular cache's append that wraps: one decode step per token.
  void append_stepwise(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
                       float* logits);
  void check_position(int64_t pos) const;
  int64_t cache_bytes(int64_t rows, int64_t max_seq) const;
  int64_t workspace_bytes(int64_t rows, int64_t max_tokens) const;

  const ModelWeights& w_;
  const ModelConfig& cfg_;
  ops::Backend& be_;
  dist::Communicator& comm_;
  ops::AttentionShape shape_;
  std::vector<float> alibi_;  // this rank's heads
  int64_t H_, local_inter_, qkv_cols_;
  bool bias_before_reduce_;  // GPT-NeoX parallel residual: the bias sum file is divided by TP
  int64_t memory_len_ = 0;
  ops::Weight prompt_w_;  // stacked p-tuning tables [prompt_end_ - prompt_start_, H]; null: none
  int64_t prompt_start_ = INT64_MAX, prompt_end_ = 0;
  std::vector<float*> prefix_kv_;       // per prefix task: [layers, 2, kv_heads, len, d] fp32
  std::vector<int64_t> prefix_len_;     // per prefix task
  int64_t max_prefix_ = 0;
  std::vector<int64_t> row_prefix_;     // per cache row: prefix slots ahead of position 0

  int64_t rows_ = 0, max_seq_ = 0, max_tokens_ = 0;
  int64_t generation_ = 0;  // bumped whenever reserve() allocates new buffers
  std::vector<int64_t> length_;
  std::vector<ops::KvCache> k_cache_, v_cache_;  // per layer
  float *x_ = nullptr, *ln_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *a_ = nullptr,
        *f_ = nullptr, *inter_ = nullptr, *gate_ = nullptr, *last_ = nullptr, *logits_ = nullptr;
};

}  // namespace ftx
