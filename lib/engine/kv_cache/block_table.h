#pragma once
// BlockTable: one sequence (a cache row) of the paged KV cache. Its slots are numbered from 0:
// first a prefix prompt's K/V (when its request names one), then one slot per token. Slot s lives
// in blocks[s / block_size] at offset s % block_size; with a circular cache (FT's memory_len) slot
// s lives where slot s mod ring does, so the row never holds more than ring slots.
#include <cstdint>
#include <vector>

namespace ftx::kv {

struct BlockTable {
  std::vector<int32_t> blocks;  // one reference to each
  int64_t slots = 0;            // slots written
  int64_t prefix = 0;           // prefix-prompt slots ahead of position 0
  // Prefix sharing: the chain key of the last full block (the cache's seed before the first) and
  // the keys of the slots written since (PrefixCache::chain).
  uint64_t chain = 0;
  std::vector<int32_t> open;
};

}  // namespace ftx::kv
