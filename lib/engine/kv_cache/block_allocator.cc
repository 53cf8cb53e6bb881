#include "lib/engine/kv_cache/block_allocator.h"

#include <string>

#include "formats/error.h"

namespace ftx::kv {

void BlockAllocator::grow(int64_t blocks) {
  FTX_CHECK(blocks >= 0 && capacity() + blocks <= INT32_MAX, "",
            "KV cache: " + std::to_string(blocks) + " more blocks is out of range");
  const int32_t first = static_cast<int32_t>(capacity());
  refs_.resize(refs_.size() + static_cast<size_t>(blocks), 0);
  taken_.resize(refs_.size(), 0);
  // New ids go under the blocks already free, lowest id on top.
  std::vector<int32_t> fresh;
  for (int32_t b = first + static_cast<int32_t>(blocks) - 1; b >= first; --b) fresh.push_back(b);
  free_.insert(free_.begin(), fresh.begin(), fresh.end());
}

int32_t BlockAllocator::take() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  ++referenced_;
  touch(b);
  return b;
}

void BlockAllocator::touch(int32_t block) {
  if (taken_[static_cast<size_t>(block)]) return;
  taken_[static_cast<size_t>(block)] = 1;
  ++touched_;
}

void BlockAllocator::check(int32_t block) const {
  FTX_CHECK(block >= 0 && block < capacity(), "",
            "internal: KV block " + std::to_string(block) + " outside the pool of " + std::to_string(capacity()));
}

void BlockAllocator::take_unlisted(int32_t block) {
  check(block);
  FTX_CHECK(refs_[static_cast<size_t>(block)] == 0, "", "internal: KV block " + std::to_string(block) + " is in use");
  refs_[static_cast<size_t>(block)] = 1;
  ++referenced_;
}

void BlockAllocator::ref(int32_t block) {
  check(block);
  if (refs_[static_cast<size_t>(block)]++ == 0) ++referenced_;
}

bool BlockAllocator::unref(int32_t block) {
  check(block);
  int32_t& r = refs_[static_cast<size_t>(block)];
  FTX_CHECK(r > 0, "", "internal: KV block " + std::to_string(block) + " released more often than taken");
  if (--r > 0) return false;
  --referenced_;
  return true;
}

void BlockAllocator::free(int32_t block) {
  check(block);
  FTX_CHECK(refs_[static_cast<size_t>(block)] == 0, "", "internal: freeing KV block " + std::to_string(block) + " in use");
  free_.push_back(block);
}

}  // namespace ftx::kv
