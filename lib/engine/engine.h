#pragma once
// Engine: the model forward for one TP rank on one backend: prefill of a right-padded batch, then
// one-token decode steps over a paged KV cache. One code path for every architecture;
// ModelConfig selects the blocks (positions, norm placement, parallel residual, MQA, activation).
//
// Cache rows: the engine has `rows` rows (batch · beam), each a sequence with its own block table
// over a pool of KV blocks of block_size tokens (lib/engine/kv_cache/). prefill() fills the rows
// it is given, starting from the leading blocks of an earlier sequence with the same tokens when
// the prefix cache holds them; copy_rows() gives rows other rows' histories by sharing blocks
// (beam fan-out and reordering: a shared block is copied only when written, one block, never a
// row); decode() appends one token to each row it is given; release_rows() gives blocks back.
// Memory follows the tokens held, and the pool is either sized by reserve() (auto: every row
// can hold max_seq tokens) or a fixed budget (EngineOptions::kv_cache) the scheduler fits
// requests into.
//
// Logits are computed only on one rank (TP rank 0 of the last pipeline stage) and delivered to
// world rank 0, the rank that decodes; the other ranks skip the lm_head GEMM. With a split lm_head
// (--use-parallel-embedding, embedding_sharding.h) every TP rank of the last stage computes its
// vocabulary rows' logits and one all-gather joins them on TP rank 0.
//
// Pipeline parallelism: the engine of stage p holds only its layers' weights
// and KV cache. Every call (prefill, append, decode, copy_rows, release_rows, reserve) is made by
// every rank with the same arguments, so every rank's block tables and prefix cache stay the same;
// stage 0 embeds the tokens, each stage runs its layers and sends the hidden
// states [tokens, H] to the next stage (with TP, each rank 1/T of them, all-gathered there), the last stage computes the logits and sends them (host
// memory, [rows, V]) to world rank 0 when that is another rank. The rows of a call go through the
// stages in micro-batches, so that stage p+1 works on one micro-batch while stage p runs the next.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "lib/dist/communicator.h"
#include "lib/dist/parallel.h"
#include "lib/engine/engine_options.h"
#include "lib/engine/kv_cache/kv_block_pool.h"
#include "lib/engine/kv_cache/kv_cache_budget.h"
#include "lib/engine/kv_cache/kv_cache_manager.h"
#include "lib/engine/model_weights.h"
#include "lib/ops/backend.h"

namespace ftx {

class PromptTables;

// Prompt scoring (generate --return-context-log-probs): which rows of a prefill or append are scored
// (`want`, one per row of the call, the same on every rank), and afterwards, on world rank 0, each
// scored row's log_probs: for each of its tokens run after the first, the log probability the model
// gives it after the tokens before it (log_softmax of the logits at the position before, over the
// whole vocabulary); empty for rows not scored. A scored row's tokens must lie in the vocabulary.
struct ContextScores {
  std::vector<uint8_t> want;
  std::vector<std::vector<float>> log_probs;
};

class Engine {
 public:
  // Tensor parallelism over `comm` (one stage).
  Engine(const ModelWeights& weights, ops::Backend& backend, dist::Communicator& comm, EngineOptions options = {});
  // Tensor × pipeline parallelism: `weights` must be this rank's stage (ModelWeights::load with
  // groups.layout()); `groups` must outlive the engine.
  Engine(const ModelWeights& weights, ops::Backend& backend, const dist::ParallelGroups& groups,
         EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Makes room for `rows` cache rows of up to `max_seq` tokens each and prefills of up to
  // `max_prefill_tokens` (batch · padded width) tokens. Only what is too small grows, and growing
  // keeps every row's cache and length, so the scheduler can grow while rows are decoding. The
  // auto pool grows to rows × max_seq tokens of blocks; a fixed budget's pool was made with the
  // engine. Before allocating, the growth is checked against the backend's available memory:
  // Error with the numbers when it does not fit.
  void reserve(int64_t rows, int64_t max_seq, int64_t max_prefill_tokens);
  // Backend bytes the cache and workspaces take at these sizes.
  int64_t bytes_for(int64_t rows, int64_t max_seq, int64_t max_prefill_tokens) const;
  int64_t rows() const { return rows_; }
  // Tokens a row can hold as callers count them: a prefix prompt's slots are extra, its marker counts one.
  int64_t max_seq() const { return max_seq_ - max_prefix_; }
  int64_t vocab_size() const { return cfg_.vocab_size; }
  int64_t sliding_window() const { return cfg_.sliding_window; }
  const RopeScaling& rope_scaling() const { return cfg_.rope_scaling; }
  int64_t hidden() const { return H_; }
  int64_t row_length(int64_t row) const {
    const kv::BlockTable& t = kv_->table(row);
    return t.slots - t.prefix + (t.prefix > 0 ? 1 : 0);
  }

  // Runs the prompts (any lengths ≥ 1) as one right-padded batch into cache rows `cache_rows`,
  // which start empty: their blocks are released, each takes the leading full blocks the prefix
  // cache holds for its tokens (at least its last token is always run, and none are taken when
  // context_embeddings are asked for: they sum over the tokens run, nor for a row `scores` scores:
  // its every token is scored), then append().
  void prefill(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& cache_rows,
               float* logits, std::vector<float>* context_embeddings = nullptr, ContextScores* scores = nullptr);
  // Appends tokens[i] (≥ 1 of them) to cache row cache_rows[i] after the row's current length (its
  // positions continue from there), as one right-padded batch: a prefill that starts where the row
  // is, so the next round of a session, or a newcomer in a freed row, costs only its new tokens.
  // logits (rank 0; may be null elsewhere): [rows, V] host, after each row's last new token.
  // context_embeddings (optional): [rows, H] host, sum over the new tokens of the last layer's
  // output (before the final layernorm; padded positions excluded).
  // scores (optional): the rows' new tokens scored (ContextScores; the first new token is not).
  void append(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
              float* logits, std::vector<float>* context_embeddings = nullptr, ContextScores* scores = nullptr);
  int64_t memory_len() const { return memory_len_; }
  // Appends tokens[i] to cache row cache_rows[i] (at position row_length) and returns the next
  // logits [n, V] (rank 0).
  void decode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& cache_rows, float* logits);
  // ---- logits left in the backend's memory (lib/engine/step_logits.h)
  // True on world rank 0 when it computes the logits (one pipeline stage): decode() with null
  // logits then leaves them, rows [0, n), in device_logits(), logits_stride() floats apart (the
  // padded vocabulary; only the first vocab_size columns are logits).
  bool logits_on_this_rank() const { return comm_.rank() == 0 && computes_logits_; }
  const float* device_logits() const { return logits_; }
  int64_t logits_stride() const;
  ops::Backend& backend() const { return be_; }
  // Row dst[i] takes row src[i]'s history (all reads before writes), sharing its blocks.
  void copy_rows(const std::vector<int32_t>& dst, const std::vector<int32_t>& src);
  // The rows give their blocks back (blocks the prefix cache holds stay cached) and are empty.
  void release_rows(const std::vector<int32_t>& rows);
  // Soft prompts (requests.h's SoftPrompt): `rows` float32 rows of H embedded for the ids
  // first_id .. first_id + rows - 1 (first_id >= soft_prompt_first_id(), prompt_tables.h) until
  // dropped. Every rank holds them; the scheduler adds them with the request and drops them when it
  // finishes.
  void add_soft_prompt(int32_t first_id, int64_t rows, const float* values);
  void drop_soft_prompt(int32_t first_id);
  void drop_soft_prompts();

  // ---- the paged KV cache, for the scheduler's admission (every rank holds the same state)
  // A fixed budget: the pool does not grow, so requests must be fitted into it.
  bool budgeted() const { return budget_.fixed(); }
  const kv::KvCacheManager& kv_cache() const { return *kv_; }
  int64_t kv_block_bytes() const { return pool_->block_bytes(); }  // K and V of every layer of this stage
  // Backend bytes of the workspaces now held, and of the KV blocks ever written (on the CPU the
  // pool's pages nothing wrote are not resident: this is its share of the resident memory).
  int64_t workspace_bytes() const { return rows_ > 0 ? workspace_bytes(rows_, max_tokens_) : 0; }
  int64_t kv_bytes_touched() const { return kv_->touched() * pool_->block_bytes(); }
  // What a prefill of `tokens` into an empty row would take from kv_cache().available(): blocks for
  // the slots the prefix cache does not hold, and cached blocks no row holds. new_keys: the chain
  // keys of the full blocks it would compute (and cache), in order.
  struct PrefillCost {
    int64_t blocks = 0;
    std::vector<uint64_t> new_keys;
  };
  // shared false: a row that takes nothing from the prefix cache (a scored prompt's).
  PrefillCost prefill_cost(const std::vector<int32_t>& tokens, bool shared = true) const;
  // What one prefill of all of `prompts` takes from available(): each one's uncached slots, and
  // the cached blocks no row holds once, however many of the prompts share them; a prompt with
  // alone[i] set takes every slot anew.
  int64_t prefill_blocks(const std::vector<std::vector<int32_t>>& prompts,
                         const std::vector<uint8_t>* alone = nullptr) const;
  // Slots a row holding `tokens` takes (a prefix prompt's marker stands for its K/V).
  int64_t slots_for(const std::vector<int32_t>& tokens) const { return static_cast<int64_t>(slot_keys(tokens).size()); }
  // Blocks from available() that appending n tokens to a row, or one token to each of `rows`,
  // would take (new blocks and copies of shared ones).
  int64_t append_cost(int32_t row, int64_t n) const;
  int64_t decode_cost(const std::vector<int32_t>& rows) const;
  // Tokens prefills and appends ran through the model, and those the prefix cache spared them.
  int64_t tokens_computed() const { return tokens_computed_; }
  int64_t tokens_reused() const { return tokens_reused_; }

 private:
  Engine(std::unique_ptr<dist::ParallelGroups> own, const ModelWeights& weights, ops::Backend& backend,
         EngineOptions options, const dist::ParallelGroups* groups = nullptr);
  // Positions first..last of one row, about to run: each must exist in the model (its learned
  // position table, its sliding window); the error names the first that does not.
  void check_positions(int64_t first, int64_t last) const;
  float kv_scale(int64_t l) const;  // KvCache::scale of this stage's cache layer l

  // ---- prefill and append (engine_append.cc)
  // Appends after the rows' ends (no prefix markers): blocks, the forward, the commit.
  void append_rows(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
                   float* logits, std::vector<float>* context_embeddings, ContextScores* scores);
  // One micro-batch of a prefill/append (rows `first`.. of the call): the embedding or the previous
  // stage's hidden states, this stage's layers, then the send to the next stage or (last stage) the
  // logits into logits_ rows [first, first + B) and the context embeddings (host, [B, H], added to).
  void append_batch(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
                    int64_t first, float* context_embeddings, ContextScores* scores);
  // A circular cache's append that wraps: one decode step per token (scored on rank 0's host).
  void append_stepwise(const std::vector<std::vector<int32_t>>& tokens, const std::vector<int32_t>& cache_rows,
                       float* logits, ContextScores* scores);
  // ---- prompt scoring (engine_scores.cc)
  // Every rank: Error unless each scored row's tokens lie in the vocabulary; sizes scores->log_probs.
  void check_scored(const std::vector<std::vector<int32_t>>& tokens, ContextScores* scores) const;
  // The last stage's TP rank 0, after a micro-batch's layers (x_: [B, S, H], rows `first`.. of the
  // call): the final norm (in place) and the lm_head on each scored row's positions but its last, a
  // chunk of positions at a time, and the log probability of each next token.
  void score_batch(const std::vector<std::vector<int32_t>>& tokens, int64_t S, int64_t first, ContextScores* scores);
  // The last stage's scores to world rank 0 (pipeline parallelism only).
  void deliver_scores(ContextScores* scores);

  // ---- decode (engine_decode.cc)
  // slots: where each token's K/V go (its position plus the row's prefix-prompt length).
  void decode_batch(const int32_t* tokens, const int32_t* cache_rows, const int32_t* positions, const int32_t* slots,
                    int64_t n, int64_t first);

  // ---- the model's math (engine_forward.cc)
  // x_ = wte[ids]·scale + position term (n tokens); a split table's lookup is joined over the TP group.
  void lookup(const int32_t* ids, const int32_t* positions, int64_t n);
  // x_ = embeddings of ids at positions (n tokens); ids >= virtual_from are prompt-table rows.
  void embed(const int32_t* ids, const int32_t* positions, int64_t n, int64_t virtual_from);
  bool has_virtual(const int32_t* ids, int64_t n, int64_t virtual_from) const;
  // The decoder stack over `n` tokens already embedded in x_; `attend` runs the attention of
  // layer l into attn_ from qkv_.
  void run_layers(int64_t n, const std::vector<int32_t>& positions, const std::function<void(int64_t)>& attend);
  void ffn(const LayerWeights& lw, ops::Act in, ops::Act out, int64_t n);
  // The model's norm (cfg_.normalization: LayerNorm, or RMSNorm without beta) over n rows of H.
  void norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t n);
  // x += y + bias; then, when gamma is set, out = norm(x).
  void add_residual_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, const float* beta,
                         ops::Act out, int64_t n);
  // The last stage's TP rank 0: final layernorm (in place on hidden) and lm_head into logits_ rows
  // [first, first + n).
  void compute_logits(ops::Act hidden, int64_t n, int64_t first);
  // out[n, padded vocab] = hidden (normed) · lm_head + bias. A split lm_head: every TP rank of the
  // stage calls it, and out (TP rank 0's; null elsewhere) gets the joined rows.
  void lm_head(ops::Act hidden, int64_t n, float* out);
  // The split lm_head's all-gather buffer holds at least `rows` rows of logits.
  void reserve_head_gather(int64_t rows);
  // A row-parallel partial sum (or the stage's hidden states) completed over the TP group.
  void all_reduce(ops::Act x, int64_t n);

  // ---- pipeline stages and the logits' way to world rank 0 (engine_pipeline.cc)
  // The rows per micro-batch for a call of `n` rows (all of them without pipeline parallelism).
  int64_t micro_batch_rows(int64_t n) const;
  // Stage 0 embeds `ids`, a later stage receives the previous stage's hidden states, into x_.
  void stage_input(const int32_t* ids, const int32_t* positions, int64_t n, int64_t virtual_from);
  // A stage other than the last sends x_ (n tokens) to the next.
  void stage_output(int64_t n);
  bool sliced_transfer(int64_t n) const;  // each TP rank sends 1/T of the hidden states
  // logits_ rows [0, n) into host `logits` on world rank 0 (null there: received and dropped).
  // download_logits: the first vocab_size columns of logits_ rows [0, n) into host [n, V].
  void deliver_logits(int64_t n, float* logits);
  void download_logits(int64_t n, float* host);
  // The last stage's context embeddings to world rank 0 (pipeline parallelism only).
  void deliver_context_embeddings(std::vector<float>* ctx);
  int last_stage_leader() const;  // world rank of the last stage's TP rank 0

  // ---- the rows' blocks (engine_cache.cc)
  // Makes the next n[i] slots of rows[i] writable (new blocks, copies of shared ones): Error naming
  // the budget when the pool cannot hold them.
  void prepare_writes(const std::vector<int32_t>& rows, const std::vector<int64_t>& n);
  // The rows' block tables for an attention call ([rows, stride_], host).
  std::vector<int32_t> block_tables(const int32_t* rows, int64_t n) const;

  // ---- p-tuning tables and prefix prompts (engine_prompts.cc)
  void load_prompts(const PromptTables& p);  // uploads them (EngineOptions::prompts)
  // Prefix prompts: when tokens[0] is a task marker, writes the task's K/V into the row's slots
  // from `held` (what the prefix cache gave it) and drops the marker. Returns the tokens to run
  // (those beyond `held`).
  std::vector<int32_t> place_prefix(const std::vector<int32_t>& tokens, int32_t row, int64_t held = 0);
  // The slot keys of a fresh row's tokens: a prefix prompt's slots carry its task, tokens their ids.
  std::vector<int32_t> slot_keys(const std::vector<int32_t>& tokens) const;
  int64_t prefix_task(const std::vector<int32_t>& tokens) const;  // -1: no prefix-prompt marker

  // ---- memory (engine_memory.cc)
  void make_kv_cache(const EngineOptions& options);  // the manager, the pool, a fixed budget's blocks
  void free_buffers();
  void free_workspace();
  int64_t blocks_per_row(int64_t slots) const;
  int64_t cache_bytes(int64_t rows, int64_t max_seq) const;  // of the pool reserve() would hold
  int64_t workspace_bytes(int64_t rows, int64_t max_tokens) const;

  std::unique_ptr<dist::ParallelGroups> own_groups_;  // the TP-only constructor's groups
  const ModelWeights& w_;
  const ModelConfig& cfg_;
  ops::Backend& be_;
  const dist::ParallelGroups& par_;
  dist::Communicator& comm_;  // the world
  dist::Communicator& tp_;    // this stage's TP group
  bool computes_logits_;      // the last stage's TP rank 0
  bool delivers_logits_;      // computes them and is not world rank 0: sends them there
  bool head_split_;           // the lm_head is split over the TP group (ModelWeights::embedding_sharding)
  bool runs_head_;            // the last stage's TP rank 0, or each of its TP ranks when head_split_
  float* head_gather_ = nullptr;  // head_split_: [head_gather_rows_, padded vocab], the ranks' logits
  int64_t head_gather_rows_ = 0;
  ops::Weight zero_row_;      // a dim-1 split table: [1, H] zeros, for the position term alone
  int64_t micro_batch_ = 0;
  ops::AttentionShape shape_;
  std::vector<float> alibi_;  // this rank's heads
  int64_t H_, local_inter_, qkv_cols_;
  int64_t local_expert_inter_ = 0, local_shared_inter_ = 0;  // a mixture of experts' widths on this rank
  bool bias_before_reduce_;  // GPT-NeoX parallel residual: the bias sum file is divided by TP
  int64_t memory_len_ = 0;
  ops::Weight prompt_w_;  // stacked p-tuning tables [prompt_end_ - prompt_start_, H]; null: none
  int64_t prompt_start_ = INT64_MAX, prompt_end_ = 0;
  struct SoftRows {
    int64_t rows = 0;
    ops::Weight w;
  };
  std::map<int32_t, SoftRows> soft_;  // by first id
  int64_t soft_start_ = 0;            // ids from here are soft-prompt rows (soft_prompt_first_id)
  std::vector<float*> prefix_kv_;       // per prefix task: [layers, 2, kv_heads, len, d] in the cache's dtype
  std::vector<int64_t> prefix_len_;     // per prefix task
  int64_t max_prefix_ = 0;

  kv::KvCacheBudget budget_;
  int64_t budget_left_ = 0;  // a fixed budget: the bytes free after its pool, when the engine was made
  std::unique_ptr<kv::KvCacheManager> kv_;  // block tables, reference counts, prefix cache
  std::unique_ptr<kv::KvBlockPool> pool_;   // the blocks' K and V, per layer of this stage
  int64_t stride_ = 0;                      // blocks per row in an attention call's tables
  int64_t tokens_computed_ = 0, tokens_reused_ = 0;

  int64_t rows_ = 0, max_seq_ = 0, max_tokens_ = 0;  // max_seq_: slots per row (prefix prompt included)
  int64_t generation_ = 0;  // bumped whenever reserve() allocates new buffers
  // Activations, in the backend's act_dtype(); the logits are fp32.
  ops::Act x_, ln_, qkv_, attn_, a_, f_, inter_, gate_, last_;
  float* logits_ = nullptr;
  float* score_logits_ = nullptr;  // prompt scoring's chunk of logits, [score_rows_, padded vocab]
  int64_t score_rows_ = 0;
};

}  // namespace ftx
