#include "lib/engine/kv_cache/kv_cache_manager.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "formats/error.h"

namespace ftx::kv {

KvCacheManager::KvCacheManager(Options options) : opt_(options) {
  FTX_CHECK(opt_.block_size >= 1, "", "KV cache: block size " + std::to_string(opt_.block_size) + " must be at least 1");
  FTX_CHECK(opt_.ring >= 0, "", "KV cache: ring of " + std::to_string(opt_.ring) + " slots");
}

void KvCacheManager::add_rows(int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    BlockTable t;
    clear(t);
    tables_.push_back(std::move(t));
  }
}

void KvCacheManager::add_blocks(int64_t n) { alloc_.grow(n); }

const BlockTable& KvCacheManager::table(int64_t r) const {
  FTX_CHECK(r >= 0 && r < rows(), "", "KV cache: row " + std::to_string(r) + " outside [0, " + std::to_string(rows()) + ")");
  return tables_[static_cast<size_t>(r)];
}

BlockTable& KvCacheManager::row(int64_t r) { return const_cast<BlockTable&>(table(r)); }

void KvCacheManager::clear(BlockTable& t) const {
  t.blocks.clear();
  t.slots = 0;
  t.prefix = 0;
  t.chain = opt_.seed;
  t.open.clear();
}

void KvCacheManager::drop(int32_t block) {
  if (!alloc_.unref(block)) return;
  if (prefix_.holds(block))
    prefix_.park(block);
  else
    alloc_.free(block);
}

int32_t KvCacheManager::allocate() {
  int32_t b = alloc_.take();
  if (b >= 0) return b;
  b = prefix_.evict();
  if (b >= 0) {
    alloc_.take_unlisted(b);
    ++stats_.evictions;
    return b;
  }
  throw Error("KV cache: all " + std::to_string(capacity()) + " blocks of " + std::to_string(opt_.block_size) +
              " tokens are in use (raise --kv-cache-memory or lower --batch-size)");
}

void KvCacheManager::release(int64_t r) {
  BlockTable& t = row(r);
  // Last block first: it is parked first, so the LRU evicts a sequence's tail before its head,
  // which other prompts are likelier to share.
  for (auto it = t.blocks.rbegin(); it != t.blocks.rend(); ++it) drop(*it);
  clear(t);
}

void KvCacheManager::fork(const std::vector<int32_t>& dst, const std::vector<int32_t>& src) {
  FTX_CHECK(dst.size() == src.size(), "", "KV cache: fork of " + std::to_string(dst.size()) + " rows from " +
                                              std::to_string(src.size()));
  std::vector<BlockTable> from;
  from.reserve(src.size());
  for (int32_t s : src) from.push_back(table(s));
  for (const BlockTable& t : from)
    for (int32_t b : t.blocks) alloc_.ref(b);  // before the old tables let go: no block falls to 0 in between
  for (size_t i = 0; i < dst.size(); ++i) {
    release(dst[i]);
    row(dst[i]) = std::move(from[i]);
  }
}

KvCacheManager::Match KvCacheManager::match(const std::vector<int32_t>& keys, int64_t max_slots,
                                            std::vector<int32_t>* parked_ids) const {
  Match m;
  if (!sharing()) return m;
  const int64_t bs = opt_.block_size;
  const int64_t limit = std::min<int64_t>(max_slots, static_cast<int64_t>(keys.size()));
  uint64_t chain = opt_.seed;
  for (int64_t i = 0; (i + 1) * bs <= limit; ++i) {
    const int32_t b = prefix_.find(chain, keys.data() + i * bs, bs);
    if (b < 0) break;
    ++m.blocks;
    if (prefix_.parked(b)) {
      ++m.parked;
      if (parked_ids) parked_ids->push_back(b);
    }
    chain = PrefixCache::chain(chain, keys.data() + i * bs, bs);
  }
  return m;
}

int64_t KvCacheManager::attach(int64_t r, const std::vector<int32_t>& keys, int64_t max_slots) {
  BlockTable& t = row(r);
  FTX_CHECK(t.slots == 0, "", "internal: prefix blocks for KV row " + std::to_string(r) + ", which is not empty");
  const int64_t n = match(keys, max_slots).blocks, bs = opt_.block_size;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = prefix_.find(t.chain, keys.data() + i * bs, bs);
    if (prefix_.parked(b)) {
      prefix_.unpark(b);
      alloc_.take_unlisted(b);
    } else {
      alloc_.ref(b);
    }
    t.blocks.push_back(b);
    t.chain = PrefixCache::chain(t.chain, keys.data() + i * bs, bs);
  }
  t.slots = n * bs;
  stats_.prefix_blocks += n;
  return t.slots;
}

template <typename F>
void KvCacheManager::for_each_block(int64_t from, int64_t n, F&& f) const {
  const int64_t bs = opt_.block_size, ring = opt_.ring;
  std::vector<int64_t> seen;  // a ring append may come back to a block
  for (int64_t s = from, end = from + n; s < end;) {
    const int64_t r = ring > 0 ? s % ring : s;
    const int64_t bi = r / bs;
    if (std::find(seen.begin(), seen.end(), bi) == seen.end()) {
      seen.push_back(bi);
      f(bi);
    }
    int64_t step = bs - r % bs;
    if (ring > 0) step = std::min(step, ring - r);  // the ring's last block may be short
    s += step;
  }
}

int64_t KvCacheManager::blocks_to_write(const std::vector<int32_t>& rows, const std::vector<int64_t>& n) const {
  FTX_CHECK(rows.size() == n.size(), "", "internal: blocks_to_write of " + std::to_string(rows.size()) + " rows");
  int64_t need = 0;
  std::unordered_map<int32_t, int32_t> copied;  // shared block -> the rows that copied it so far
  for (size_t i = 0; i < rows.size(); ++i) {
    const BlockTable& t = table(rows[i]);
    for_each_block(t.slots, n[i], [&](int64_t bi) {
      if (bi >= static_cast<int64_t>(t.blocks.size())) {
        ++need;
        return;
      }
      const int32_t b = t.blocks[static_cast<size_t>(bi)];
      if (alloc_.refs(b) - copied[b] > 1) {  // still shared when this row writes: it copies
        ++need;
        ++copied[b];
      }
    });
  }
  return need;
}

void KvCacheManager::prepare_write(int64_t r, int64_t n, std::vector<BlockCopy>* copies) {
  BlockTable& t = row(r);
  for_each_block(t.slots, n, [&](int64_t bi) {
    if (bi == static_cast<int64_t>(t.blocks.size())) {
      t.blocks.push_back(allocate());
      return;
    }
    FTX_CHECK(bi < static_cast<int64_t>(t.blocks.size()), "", "internal: KV row " + std::to_string(r) + " skips a block");
    int32_t& b = t.blocks[static_cast<size_t>(bi)];
    if (alloc_.refs(b) == 1) return;
    const int32_t fresh = allocate();
    copies->push_back({b, fresh});
    ++stats_.block_copies;
    drop(b);  // still held by the rows it is shared with
    b = fresh;
  });
}

void KvCacheManager::commit(int64_t r, const int32_t* keys, int64_t n) {
  BlockTable& t = row(r);
  const int64_t bs = opt_.block_size;
  if (!sharing()) {
    t.slots += n;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    t.open.push_back(keys[i]);
    const int64_t slot = t.slots++;
    if (static_cast<int64_t>(t.open.size()) < bs) continue;
    // The block of `slot` is full: cache it under its chain key (unless an equal block already is).
    prefix_.insert(t.chain, t.open.data(), bs, t.blocks[static_cast<size_t>(slot / bs)]);
    t.chain = PrefixCache::chain(t.chain, t.open.data(), bs);
    t.open.clear();
  }
}

void KvCacheManager::set_prefix(int64_t r, int64_t slots) { row(r).prefix = slots; }

}  // namespace ftx::kv
