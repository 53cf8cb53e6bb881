// The engine's side of the paged KV cache (lib/engine/kv_cache/): making a call's slots writable,
// the rows' block tables for the attention, rows sharing and giving back blocks, and what a
// prefill, append or decode would take from the pool (the scheduler asks before it admits).
#include "lib/engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/error.h"

namespace ftx {

void Engine::prepare_writes(const std::vector<int32_t>& rows, const std::vector<int64_t>& n) {
  const int64_t need = kv_->blocks_to_write(rows, n);
  if (need > kv_->available())
    throw Error("KV cache: " + std::to_string(need) + " more blocks of " + std::to_string(kv_->block_size()) +
                " tokens are needed, " + std::to_string(kv_->available()) + " of the " +
                std::to_string(kv_->capacity()) + " are free (raise --kv-cache-memory or lower --batch-size)");
  std::vector<kv::BlockCopy> copies;
  for (size_t i = 0; i < rows.size(); ++i) kv_->prepare_write(rows[i], n[i], &copies);
  pool_->copy(copies);
}

std::vector<int32_t> Engine::block_tables(const int32_t* rows, int64_t n) const {
  std::vector<int32_t> ids(static_cast<size_t>(n * stride_), 0);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& blocks = kv_->table(rows[i]).blocks;
    FTX_CHECK(static_cast<int64_t>(blocks.size()) <= stride_, "",
              "internal: KV row " + std::to_string(rows[i]) + " holds " + std::to_string(blocks.size()) +
                  " blocks, its table " + std::to_string(stride_));
    std::copy(blocks.begin(), blocks.end(), ids.begin() + i * stride_);
  }
  return ids;
}

void Engine::copy_rows(const std::vector<int32_t>& dst, const std::vector<int32_t>& src) {
  if (dst.empty()) return;
  for (size_t i = 0; i < dst.size(); ++i)
    FTX_CHECK(dst[i] >= 0 && dst[i] < rows_ && src[i] >= 0 && src[i] < rows_, "", "copy_rows: cache row out of range");
  kv_->fork(dst, src);
}

void Engine::release_rows(const std::vector<int32_t>& rows) {
  for (int32_t r : rows) {
    FTX_CHECK(r >= 0 && r < rows_, "", "release_rows: cache row " + std::to_string(r) + " out of range");
    kv_->release(r);
  }
}

Engine::PrefillCost Engine::prefill_cost(const std::vector<int32_t>& tokens, bool shared) const {
  PrefillCost c;
  const std::vector<int32_t> keys = slot_keys(tokens);
  const int64_t n = static_cast<int64_t>(keys.size()), bs = kv_->block_size();
  const kv::KvCacheManager::Match m = shared ? kv_->match(keys, n - 1) : kv::KvCacheManager::Match();
  // Slots of a circular row stop at the ring.
  const int64_t blocks = blocks_per_row(memory_len_ > 0 ? std::min(n, memory_len_) : n);
  c.blocks = blocks - m.blocks + m.parked;
  if (kv_->sharing()) {
    uint64_t chain = kv_->seed();
    for (int64_t i = 0; (i + 1) * bs <= n; ++i) {
      chain = kv::PrefixCache::chain(chain, keys.data() + i * bs, bs);
      if (i >= m.blocks) c.new_keys.push_back(chain);
    }
  }
  return c;
}

int64_t Engine::prefill_blocks(const std::vector<std::vector<int32_t>>& prompts,
                               const std::vector<uint8_t>* alone) const {
  std::vector<int32_t> parked;
  int64_t fresh = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> keys = slot_keys(prompts[i]);
    const int64_t n = static_cast<int64_t>(keys.size());
    fresh += blocks_per_row(memory_len_ > 0 ? std::min(n, memory_len_) : n);
    if (!alone || !(*alone)[i]) fresh -= kv_->match(keys, n - 1, &parked).blocks;
  }
  std::sort(parked.begin(), parked.end());
  return fresh + (std::unique(parked.begin(), parked.end()) - parked.begin());
}

int64_t Engine::append_cost(int32_t row, int64_t n) const { return kv_->blocks_to_write({row}, {n}); }

int64_t Engine::decode_cost(const std::vector<int32_t>& rows) const {
  return kv_->blocks_to_write(rows, std::vector<int64_t>(rows.size(), 1));
}

}  // namespace ftx
