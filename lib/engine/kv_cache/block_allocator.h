#pragma once
// BlockAllocator: the KV cache's blocks as ids with reference counts and a free list. It knows
// nothing of tokens or devices: a block is an index into the pool of every layer's K and V
// (kv_block_pool.h), and a sequence's block table (block_table.h) holds one reference to each of
// its blocks. Blocks whose count falls to 0 go back to the free list, or, when they hold a cached
// prefix, to the prefix cache's LRU list (prefix_cache.h) until memory is needed.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ftx::kv {

class BlockAllocator {
 public:
  // Adds `blocks` new ids at the bottom of the free list (taken after every block already freed).
  void grow(int64_t blocks);
  int64_t capacity() const { return static_cast<int64_t>(refs_.size()); }
  int64_t free_count() const { return static_cast<int64_t>(free_.size()); }
  // Blocks some sequence refers to, and blocks ever taken (on the CPU, the pool's resident part).
  int64_t referenced() const { return referenced_; }
  int64_t touched() const { return touched_; }

  // A free block with one reference, or -1 when the free list is empty. Last freed, first taken:
  // its memory was touched most recently (on the CPU, pages never touched are not yet resident).
  int32_t take();
  // A block that holds no reference and is not on the free list (an evicted prefix block) gets one.
  void take_unlisted(int32_t block);
  void ref(int32_t block);
  // Drops one reference; true when none is left (the caller then frees or caches the block).
  bool unref(int32_t block);
  // A block without references back onto the free list.
  void free(int32_t block);
  int32_t refs(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

 private:
  void check(int32_t block) const;
  void touch(int32_t block);
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // a stack: back() is taken next
  std::vector<uint8_t> taken_;  // per block: ever taken
  int64_t referenced_ = 0, touched_ = 0;
};

}  // namespace ftx::kv
