#pragma once
// KvBlockPool: the device side of the paged KV cache. Per layer of this rank's stage, K and V are
// each one allocation of [blocks, kv_heads, block_size, head_dim] elements of the KV cache's
// dtype (ops::KvCache, with the layer's INT8 scale), the layout the attention ops read through
// block tables (lib/ops/backend.h). Block ids are those of the KvCacheManager; growing the pool
// keeps every block where it was.
#include <cstdint>
#include <vector>

#include "lib/engine/kv_cache/kv_cache_manager.h"
#include "lib/ops/backend.h"

namespace ftx::kv {

class KvBlockPool {
 public:
  // dtype: what K and V are held in (the backend's kv_dtype(), int8 or FP8 E4M3); scales: each
  // layer's KvCache::scale (the INT8 cache's kv_quant_orig; 1 otherwise).
  KvBlockPool(ops::Backend& backend, DType dtype, std::vector<float> scales, int64_t kv_heads, int64_t head_dim,
              int64_t block_size);
  ~KvBlockPool();
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  int64_t blocks() const { return blocks_; }
  int64_t layers() const { return static_cast<int64_t>(scales_.size()); }
  int64_t block_elems() const { return kv_heads_ * block_size_ * head_dim_; }
  // Backend bytes of one block: K and V of every layer.
  int64_t block_bytes() const;
  // Grows to `blocks` blocks (no-op when it has as many); blocks keep their contents. Holds the old
  // and the new allocation of one layer's K or V at a time.
  void grow(int64_t blocks);
  const ops::KvCache& k(int64_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const ops::KvCache& v(int64_t layer) const { return v_[static_cast<size_t>(layer)]; }

  // Copy on write: each copy's source block into its destination, K and V of every layer.
  void copy(const std::vector<BlockCopy>& copies);
  // Slots [first, first + n) of the row whose blocks are `table` (a row never wraps here) take
  // `src`'s elements [kv_heads, src_len, head_dim] from element src_first of each head: layer
  // `layer`'s K (kv 0) or V (kv 1). `src` is in the cache's dtype and scale.
  void write_slots(int64_t layer, int kv, const std::vector<int32_t>& table, int64_t first, int64_t n,
                   const ops::KvCache& src, int64_t src_len, int64_t src_first);

 private:
  ops::Backend& be_;
  DType dtype_;
  std::vector<float> scales_;
  int64_t kv_heads_, head_dim_, block_size_;
  int64_t blocks_ = 0;
  std::vector<ops::KvCache> k_, v_;
};

}  // namespace ftx::kv
