#include "lib/engine/kv_cache/kv_block_pool.h"

#include <algorithm>
#include <string>

#include "formats/error.h"

namespace ftx::kv {

KvBlockPool::KvBlockPool(ops::Backend& backend, DType dtype, std::vector<float> scales, int64_t kv_heads,
                         int64_t head_dim, int64_t block_size)
    : be_(backend),
      dtype_(dtype),
      scales_(std::move(scales)),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      block_size_(block_size) {}

KvBlockPool::~KvBlockPool() {
  for (const ops::KvCache& c : k_) be_.release_kv(c);
  for (const ops::KvCache& c : v_) be_.release_kv(c);
}

int64_t KvBlockPool::block_bytes() const {
  return 2 * layers() * block_elems() * static_cast<int64_t>(dtype_size(dtype_));
}

void KvBlockPool::grow(int64_t blocks) {
  if (blocks <= blocks_) return;
  const size_t n = static_cast<size_t>(blocks * block_elems());
  for (int64_t l = 0; l < layers(); ++l)
    for (auto* caches : {&k_, &v_}) {
      ops::KvCache grown = be_.alloc_kv(n, dtype_);
      grown.scale = scales_[static_cast<size_t>(l)];
      if (static_cast<int64_t>(caches->size()) > l) {
        const ops::KvCache old = (*caches)[static_cast<size_t>(l)];
        const int64_t held = blocks_ * block_elems();
        be_.copy_kv_2d(grown, held, old, held, held, 1);
        be_.release_kv(old);
        (*caches)[static_cast<size_t>(l)] = grown;
      } else {
        caches->push_back(grown);
      }
    }
  blocks_ = blocks;
}

void KvBlockPool::copy(const std::vector<BlockCopy>& copies) {
  if (copies.empty()) return;
  std::vector<int32_t> dst, src;
  for (const BlockCopy& c : copies) {
    dst.push_back(c.dst);
    src.push_back(c.src);
  }
  // A block is a "row" of the gather: block_elems elements, its K or V of one layer.
  const int64_t n = static_cast<int64_t>(copies.size());
  for (int64_t l = 0; l < layers(); ++l) {
    be_.gather_cache_rows(k(l), dst.data(), src.data(), n, block_elems());
    be_.gather_cache_rows(v(l), dst.data(), src.data(), n, block_elems());
  }
}

void KvBlockPool::write_slots(int64_t layer, int kv, const std::vector<int32_t>& table, int64_t first, int64_t n,
                              const ops::KvCache& src, int64_t src_len, int64_t src_first) {
  const ops::KvCache& cache = kv == 0 ? k(layer) : v(layer);
  const size_t el = dtype_size(cache.dtype);
  const int64_t d = head_dim_, bs = block_size_;
  // One 2-D copy per block: kv_heads rows of the slots that fall in it.
  for (int64_t s = first; s < first + n;) {
    const int64_t in_block = std::min(bs - s % bs, first + n - s);
    const int64_t block = table[static_cast<size_t>(s / bs)];
    ops::KvCache dst(static_cast<char*>(cache.data) + static_cast<size_t>(block * block_elems() + (s % bs) * d) * el,
                     cache.dtype, cache.scale);
    ops::KvCache from(static_cast<char*>(src.data) + static_cast<size_t>((src_first + s - first) * d) * el, src.dtype,
                      src.scale);
    be_.copy_kv_2d(dst, bs * d, from, src_len * d, in_block * d, kv_heads_);
    s += in_block;
  }
}

}  // namespace ftx::kv
