#pragma once
// PrefixCache: full KV blocks found again by what produced them (vLLM's automatic prefix caching,
// SGLang's radix cache). A block's key is a hash chain: the key of the block before it in its
// sequence (for the first block, a seed naming the engine's cache: dtype and INT8 scales) and the
// keys of its slots (token ids; prefix-prompt slots carry their task), so equal keys mean equal
// K/V from position 0. Each entry also keeps its parent key and slot keys and a lookup compares
// them, so only a collision of two 64-bit chain keys could alias two prefixes.
//
// A cached block that no sequence refers to stays cached, "parked" on an LRU list, until the
// allocator needs memory and evicts the least recently parked one.
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace ftx::kv {

class PrefixCache {
 public:
  // The chain key of a block after `parent` whose slots hold `keys`.
  static uint64_t chain(uint64_t parent, const int32_t* keys, int64_t n);

  // The block cached under (parent, keys), or -1.
  int32_t find(uint64_t parent, const int32_t* keys, int64_t n) const;
  // Caches `block` under (parent, keys) and returns true; false (and nothing changes) when that key
  // is already cached, or the block already holds another.
  bool insert(uint64_t parent, const int32_t* keys, int64_t n, int32_t block);
  bool holds(int32_t block) const { return key_of_.count(block) != 0; }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

  // The LRU list of cached blocks without references.
  void park(int32_t block);    // its last reference went: most recently used
  void unpark(int32_t block);  // referenced again
  bool parked(int32_t block) const { return lru_pos_.count(block) != 0; }
  int64_t parked_count() const { return static_cast<int64_t>(lru_.size()); }
  // Drops the least recently parked block from the cache and returns it; -1 when none is parked.
  int32_t evict();

 private:
  struct Entry {
    uint64_t parent = 0;
    std::vector<int32_t> keys;
    int32_t block = -1;
  };
  std::unordered_map<uint64_t, Entry> entries_;   // by chain key
  std::unordered_map<int32_t, uint64_t> key_of_;  // cached block -> its chain key
  std::list<int32_t> lru_;                        // front: evicted first
  std::unordered_map<int32_t, std::list<int32_t>::iterator> lru_pos_;
};

}  // namespace ftx::kv
