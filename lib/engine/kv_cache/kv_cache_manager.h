#pragma once
// KvCacheManager: the host side of the paged KV cache. It owns every sequence's block table (one
// per cache row), the block allocator (reference counts, free list) and the prefix cache, and
// decides which block each slot goes to; the device side (kv_block_pool.h) holds the blocks'
// K and V and carries out the copies this class asks for. Nothing here touches device memory, so
// every rank of a TP × PP run, making the same calls, holds the same tables.
//
// Sharing: fork() gives a row another row's blocks (beam search, a session's best beam) by
// reference; writing into a block that another row also holds first copies it (copy on write:
// only ever the block being written, never a whole row). A fresh row can start with the leading
// full blocks of an earlier sequence with the same slot keys (attach(); prefix_cache.h).
#include <cstdint>
#include <vector>

#include "lib/engine/kv_cache/block_allocator.h"
#include "lib/engine/kv_cache/block_table.h"
#include "lib/engine/kv_cache/prefix_cache.h"

namespace ftx::kv {

// Block `src`'s K and V (every layer) into block `dst`, before anything is written to `dst`.
struct BlockCopy {
  int32_t src = 0, dst = 0;
};

struct KvCacheStats {
  int64_t prefix_blocks = 0;  // blocks prefills found in the prefix cache
  int64_t block_copies = 0;   // copy-on-write copies
  int64_t evictions = 0;      // cached blocks reused for other tokens
};

class KvCacheManager {
 public:
  struct Options {
    int64_t block_size = 64;  // slots per block
    int64_t ring = 0;         // > 0: circular rows of this many slots (no prefix sharing then)
    bool prefix_cache = true;
    uint64_t seed = 0;        // chain key before a sequence's first block (names the cache's contents)
  };
  explicit KvCacheManager(Options options);

  int64_t block_size() const { return opt_.block_size; }
  int64_t ring() const { return opt_.ring; }
  bool sharing() const { return opt_.prefix_cache && opt_.ring == 0; }
  uint64_t seed() const { return opt_.seed; }
  void add_rows(int64_t n);
  void add_blocks(int64_t n);
  int64_t rows() const { return static_cast<int64_t>(tables_.size()); }
  int64_t capacity() const { return alloc_.capacity(); }
  // Blocks a write can take: free ones and cached ones no sequence holds.
  int64_t available() const { return alloc_.free_count() + prefix_.parked_count(); }
  int64_t referenced() const { return alloc_.referenced(); }  // blocks some row holds
  int64_t touched() const { return alloc_.touched(); }        // blocks ever written
  int64_t cached() const { return prefix_.size(); }
  int32_t refs(int32_t block) const { return alloc_.refs(block); }
  const BlockTable& table(int64_t row) const;
  const KvCacheStats& stats() const { return stats_; }

  // The row gives up its blocks (cached ones stay cached) and is empty again.
  void release(int64_t row);
  // Row dst[i] takes row src[i]'s blocks and state, all reads before any write.
  void fork(const std::vector<int32_t>& dst, const std::vector<int32_t>& src);

  // ---- prefix sharing
  // The leading full blocks the cache holds for a fresh row's slot keys, within the first
  // max_slots slots: how many, and how many of them no row holds (taking those lowers available();
  // their ids go to `parked_ids` when given: rows that share one take it once).
  struct Match {
    int64_t blocks = 0, parked = 0;
  };
  Match match(const std::vector<int32_t>& keys, int64_t max_slots, std::vector<int32_t>* parked_ids = nullptr) const;
  // The empty row takes those blocks; returns the slots it now holds.
  int64_t attach(int64_t row, const std::vector<int32_t>& keys, int64_t max_slots);

  // ---- writing
  // Blocks from available() that writing n[i] slots after the end of rows[i] takes (new blocks and
  // copies of shared ones), with the rows taken in order as prepare_write() does.
  int64_t blocks_to_write(const std::vector<int32_t>& rows, const std::vector<int64_t>& n) const;
  // Makes slots [slots, slots + n) of the row writable: new blocks, and copy on write of a block
  // another row shares ((src, dst) appended to `copies`, for the device to copy first). Error when
  // no block is left (blocks_to_write() says beforehand).
  void prepare_write(int64_t row, int64_t n, std::vector<BlockCopy>* copies);
  // Those n slots now hold `keys` (token ids; prefix-prompt slots their task's key): the row's
  // length advances, and blocks that became full join the prefix cache.
  void commit(int64_t row, const int32_t* keys, int64_t n);
  void set_prefix(int64_t row, int64_t slots);

 private:
  BlockTable& row(int64_t r);
  void clear(BlockTable& t) const;
  int32_t allocate();      // a free block, else the least recently parked cached one
  void drop(int32_t block);  // one reference less: to the free list or the LRU when none is left
  // Calls f(index into blocks) for each block holding slots [from, from + n), once each.
  template <typename F>
  void for_each_block(int64_t from, int64_t n, F&& f) const;

  Options opt_;
  BlockAllocator alloc_;
  PrefixCache prefix_;
  std::vector<BlockTable> tables_;
  KvCacheStats stats_;
};

}  // namespace ftx::kv
