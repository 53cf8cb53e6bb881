// The engine's memory: the pool of the paged KV cache (grown to what reserve() asks for, or a
// fixed budget allocated with the engine, the same number of blocks on every rank) and the
// activation workspaces, each checked against the backend's free memory before it is allocated.
#include "lib/engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "formats/error.h"

namespace ftx {

namespace {

// The smallest of every rank's value (each rank broadcasts its own in turn; a few bytes, once).
int64_t min_over_ranks(dist::Communicator& comm, int64_t mine) {
  int64_t m = mine;
  for (int r = 0; r < comm.size(); ++r) {
    int64_t v = mine;
    comm.broadcast(&v, sizeof v, r);
    m = std::min(m, v);
  }
  return m;
}

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// Exact below 1 MiB: a workspace and what is left beside a pool can differ by a few KiB.
std::string mib(int64_t bytes) {
  char buf[32];
  if (bytes < (1 << 20)) std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

void Engine::make_kv_cache(const EngineOptions& options) {
  FTX_CHECK(options.block_size >= 1, "", "KV cache block size " + std::to_string(options.block_size) + " is not positive");
  // The prefix cache's seed names what a block's K/V depend on besides the tokens: the cache's
  // dtype and the INT8 scales it was quantised with.
  std::vector<float> scales;
  uint64_t seed = static_cast<uint64_t>(w_.kv_dtype()) * 0x100000001b3ull + 0x811c9dc5ull;
  for (int64_t l = 0; l < static_cast<int64_t>(w_.layers.size()); ++l) {
    scales.push_back(kv_scale(l));
    uint32_t bits = 0;
    std::memcpy(&bits, &scales.back(), sizeof bits);
    seed = kv::PrefixCache::chain(seed, reinterpret_cast<const int32_t*>(&bits), 1);
  }
  kv::KvCacheManager::Options ko;
  ko.block_size = options.block_size;
  ko.ring = memory_len_;
  ko.prefix_cache = options.prefix_cache;
  ko.seed = seed;
  kv_ = std::make_unique<kv::KvCacheManager>(ko);
  pool_ = std::make_unique<kv::KvBlockPool>(be_, w_.kv_dtype(), scales, shape_.kv_heads, shape_.head_dim, options.block_size);
  shape_.block_size = options.block_size;
  budget_ = options.kv_cache;
  if (!budget_.fixed()) return;
  // A fixed budget is allocated now, the same number of blocks on every rank (pipeline stages may
  // hold different numbers of layers, and ranks different free memory).
  const size_t avail = be_.available_memory();
  const int64_t bytes = pool_->block_bytes();
  const int64_t mine = bytes > 0 ? budget_.blocks(bytes, avail) : INT64_MAX;
  const int64_t blocks = min_over_ranks(comm_, mine);
  FTX_CHECK(blocks >= 1, "", "--kv-cache-memory " + budget_.describe() + " holds no KV block of " +
                                 std::to_string(options.block_size) + " tokens (" + std::to_string(bytes) +
                                 " bytes each on this rank)");
  FTX_CHECK(budget_.kind != kv::KvCacheBudget::Kind::kBytes || static_cast<double>(blocks * bytes) <= static_cast<double>(avail), "",
            be_.name() + " backend: out of memory before allocating: --kv-cache-memory " + budget_.describe() + ", " +
                gib(static_cast<int64_t>(avail)) + " is available");
  if (bytes > 0) pool_->grow(blocks);
  kv_->add_blocks(blocks);
  budget_left_ = static_cast<int64_t>(avail) - blocks * bytes;
}

void Engine::free_workspace() {
  for (ops::Act* p : {&x_, &ln_, &qkv_, &attn_, &a_, &f_, &inter_, &gate_, &last_}) {
    if (*p) be_.release_act(*p);
    *p = ops::Act();
  }
  if (logits_) be_.release(logits_);
  logits_ = nullptr;
  if (score_logits_) be_.release(score_logits_);
  score_logits_ = nullptr;
  score_rows_ = 0;
  if (head_gather_) be_.release(head_gather_);
  head_gather_ = nullptr;
  head_gather_rows_ = 0;
}

void Engine::reserve_head_gather(int64_t rows) {
  if (!head_split_ || !runs_head_ || rows <= head_gather_rows_) return;
  if (head_gather_) {  // a longer prompt to score than rows: recorded decode steps name the old buffer
    be_.forget_repeatables();
    ++generation_;
    be_.release(head_gather_);
  }
  head_gather_ = be_.alloc(static_cast<size_t>(rows * w_.padded_vocab()));
  head_gather_rows_ = rows;
}

void Engine::free_buffers() {
  be_.forget_repeatables();  // recorded decode steps name these buffers
  pool_.reset();
  free_workspace();
}

int64_t Engine::blocks_per_row(int64_t slots) const {
  const int64_t bs = kv_->block_size();
  return (slots + bs - 1) / bs;
}

int64_t Engine::cache_bytes(int64_t rows, int64_t max_seq) const {
  if (budgeted()) return pool_->blocks() * pool_->block_bytes();
  return rows * blocks_per_row(max_seq) * pool_->block_bytes();
}

int64_t Engine::workspace_bytes(int64_t rows, int64_t max_tokens) const {
  const int64_t per_token = 4 * H_ + qkv_cols_ + shape_.q_heads * shape_.head_dim + 2 * local_inter_;
  // TP rank 0's logits, and a split lm_head's all-gather buffer on each TP rank of the last stage.
  const int64_t logits = ((computes_logits_ ? 1 : 0) + (head_split_ && runs_head_ ? 1 : 0)) * rows * w_.padded_vocab();
  const auto act = static_cast<int64_t>(dtype_size(be_.act_dtype()));
  return act * (max_tokens * per_token + rows * H_) + static_cast<int64_t>(sizeof(float)) * logits;
}

int64_t Engine::bytes_for(int64_t rows, int64_t max_seq, int64_t max_prefill_tokens) const {
  return cache_bytes(rows, max_seq) + workspace_bytes(rows, std::max(max_prefill_tokens, rows));
}

void Engine::reserve(int64_t rows, int64_t max_seq, int64_t max_prefill_tokens) {
  FTX_CHECK(rows > 0 && max_seq > 0 && max_prefill_tokens >= 0, "",
            "reserve: rows " + std::to_string(rows) + ", max_seq " + std::to_string(max_seq));
  // A circular cache holds exactly memory_len slots per row, whatever the sequences' lengths.
  if (memory_len_ > 0) max_seq = memory_len_;
  max_seq += max_prefix_;  // a prefix prompt's K/V sit ahead of the row's tokens
  const int64_t new_rows = std::max(rows, rows_), new_seq = std::max(max_seq, max_seq_);
  const int64_t new_tokens = std::max({max_prefill_tokens, new_rows, max_tokens_});
  const bool grow_cache = new_rows != rows_ || new_seq != max_seq_;
  const bool grow_work = grow_cache || new_tokens != max_tokens_;
  if (!grow_work) return;

  // Refuse before allocating. Growing the cache holds the old and the new copy of one layer at once.
  // A fixed budget's pool was allocated with the engine: only the workspaces are new, and they get
  // what the budget left (a CPU's untouched pool pages still look free).
  const int64_t held_work = rows_ > 0 ? workspace_bytes(rows_, max_tokens_) : 0;
  const int64_t held = (rows_ > 0 || budgeted() ? cache_bytes(rows_, max_seq_) : 0) + held_work;
  const int64_t want_cache = cache_bytes(new_rows, new_seq), want_work = workspace_bytes(new_rows, new_tokens);
  const int64_t L = static_cast<int64_t>(w_.layers.size());  // this stage's
  const bool grow_pool = !budgeted() && want_cache > pool_->blocks() * pool_->block_bytes();
  const int64_t transient = grow_pool && L > 0 ? want_cache / (2 * L) : 0;
  const int64_t extra = want_cache + want_work - held + transient;
  size_t avail = be_.available_memory();
  if (budgeted()) avail = std::min<size_t>(avail, static_cast<size_t>(std::max<int64_t>(budget_left_ - held_work, 0)));
  if (extra > 0 && static_cast<uint64_t>(extra) > avail && budgeted())
    throw Error(be_.name() + " backend: out of memory before allocating: the workspaces for " + std::to_string(new_rows) +
                " rows (batch x beam) need " + mib(want_work) + ", and --kv-cache-memory " + budget_.describe() +
                " (a pool of " + gib(want_cache) + ") leaves " + mib(static_cast<int64_t>(avail)) +
                " (lower --kv-cache-memory, e.g. 0.9, or --batch-size or --beam-width)");
  if (extra > 0 && static_cast<uint64_t>(extra) > avail)
    throw Error(be_.name() + " backend: out of memory before allocating: the KV cache for " + std::to_string(new_rows) +
                " rows (batch x beam) x " + std::to_string(new_seq) + " tokens x " + std::to_string(L) +
                " layers needs " + gib(want_cache) + " and the workspaces " + gib(want_work) + "; " +
                gib(static_cast<int64_t>(avail)) + " is available (lower --batch-size, --beam-width or --max-seq-len)");

  be_.forget_repeatables();  // recorded decode steps name the buffers replaced here
  ++generation_;
  if (grow_cache) {
    // Blocks keep their ids and contents, rows their tables: nothing a row holds moves.
    if (grow_pool) {
      const int64_t blocks = new_rows * blocks_per_row(memory_len_ > 0 ? memory_len_ : new_seq);
      pool_->grow(blocks);
      kv_->add_blocks(blocks - kv_->capacity());
    }
    kv_->add_rows(new_rows - rows_);
    rows_ = new_rows;
    max_seq_ = new_seq;
    stride_ = blocks_per_row(memory_len_ > 0 ? memory_len_ : max_seq_);
    shape_.max_seq = stride_ * kv_->block_size();
  }
  free_workspace();
  max_tokens_ = new_tokens;
  const size_t T = static_cast<size_t>(max_tokens_);
  x_ = be_.alloc_act(T * H_);
  ln_ = be_.alloc_act(T * H_);
  a_ = be_.alloc_act(T * H_);
  f_ = be_.alloc_act(T * H_);
  qkv_ = be_.alloc_act(T * qkv_cols_);
  attn_ = be_.alloc_act(T * shape_.q_heads * shape_.head_dim);
  inter_ = be_.alloc_act(T * local_inter_);
  gate_ = be_.alloc_act(T * local_inter_);
  last_ = be_.alloc_act(static_cast<size_t>(rows_) * H_);
  if (computes_logits_) logits_ = be_.alloc(static_cast<size_t>(rows_ * w_.padded_vocab()));
  reserve_head_gather(rows_);
}

}  // namespace ftx
