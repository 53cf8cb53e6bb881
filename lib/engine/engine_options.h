#pragma once
// What an Engine is made with besides its weights, backend and ranks (engine.h): the circular
// cache, the prompt tables, the pipeline's micro-batches and the paged KV cache.
#include <cstdint>

#include "lib/engine/kv_cache/kv_cache_budget.h"

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
  // Pipeline parallelism: rows per micro-batch (0: ceil(rows / P), one micro-batch per stage). FT
  // uses batch / P only when P divides the batch (else the whole batch, no overlap) and halves it
  // while micro-batch x tokens > 1024; ftx splits any batch. Any value gives the same logits.
  int64_t micro_batch = 0;
  // The paged KV cache: tokens per block (any size ≥ 1 on the CPU; the CUDA kernels want a power
  // of two), how much memory it may take (kv_cache_budget.h), and whether full blocks are kept
  // for later prefills of the same tokens (off for calibration, which must see every token run).
  int64_t block_size = 64;
  kv::KvCacheBudget kv_cache;
  bool prefix_cache = true;
};

}  // namespace ftx
