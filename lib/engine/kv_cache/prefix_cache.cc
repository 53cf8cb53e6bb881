#include "lib/engine/kv_cache/prefix_cache.h"

#include <algorithm>
#include <string>

#include "formats/error.h"

namespace ftx::kv {

namespace {

// splitmix64's finaliser: every input bit reaches every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t PrefixCache::chain(uint64_t parent, const int32_t* keys, int64_t n) {
  uint64_t h = mix(parent ^ static_cast<uint64_t>(n));
  for (int64_t i = 0; i < n; ++i) h = mix(h ^ static_cast<uint32_t>(keys[i]));
  return h;
}

int32_t PrefixCache::find(uint64_t parent, const int32_t* keys, int64_t n) const {
  const auto it = entries_.find(chain(parent, keys, n));
  if (it == entries_.end()) return -1;
  const Entry& e = it->second;
  if (e.parent != parent || static_cast<int64_t>(e.keys.size()) != n || !std::equal(e.keys.begin(), e.keys.end(), keys))
    return -1;
  return e.block;
}

bool PrefixCache::insert(uint64_t parent, const int32_t* keys, int64_t n, int32_t block) {
  if (holds(block)) return false;
  const uint64_t key = chain(parent, keys, n);
  if (entries_.count(key)) return false;
  entries_[key] = Entry{parent, std::vector<int32_t>(keys, keys + n), block};
  key_of_[block] = key;
  return true;
}

void PrefixCache::park(int32_t block) {
  FTX_CHECK(holds(block) && !parked(block), "", "internal: parking KV block " + std::to_string(block));
  lru_pos_[block] = lru_.insert(lru_.end(), block);
}

void PrefixCache::unpark(int32_t block) {
  const auto it = lru_pos_.find(block);
  if (it == lru_pos_.end()) return;
  lru_.erase(it->second);
  lru_pos_.erase(it);
}

int32_t PrefixCache::evict() {
  if (lru_.empty()) return -1;
  const int32_t block = lru_.front();
  lru_.pop_front();
  lru_pos_.erase(block);
  const auto k = key_of_.find(block);
  entries_.erase(k->second);
  key_of_.erase(k);
  return block;
}

}  // namespace ftx::kv
