// lib/engine/kv_cache: the block allocator's reference counts and free list, forks that share
// blocks and copy only the block being written, the prefix cache's chain keys and LRU, circular
// rows, and the --kv-cache-memory values. Host logic only: every test ends with no block held.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "formats/error.h"
#include "lib/engine/kv_cache/kv_cache_budget.h"
#include "lib/engine/kv_cache/kv_cache_manager.h"

namespace ftx::kv {
namespace {

KvCacheManager make(int64_t block_size, int64_t blocks, int64_t rows, int64_t ring = 0, bool prefix = true) {
  KvCacheManager::Options o;
  o.block_size = block_size;
  o.ring = ring;
  o.prefix_cache = prefix;
  o.seed = 42;
  KvCacheManager m(o);
  m.add_blocks(blocks);
  m.add_rows(rows);
  return m;
}

std::vector<int32_t> iota_keys(int64_t n, int32_t from = 1) {
  std::vector<int32_t> k(static_cast<size_t>(n));
  std::iota(k.begin(), k.end(), from);
  return k;
}

// Writes `keys` after the row's end, as the engine does: prepare, (device work), commit.
std::vector<BlockCopy> write(KvCacheManager& m, int64_t row, const std::vector<int32_t>& keys) {
  std::vector<BlockCopy> copies;
  m.prepare_write(row, static_cast<int64_t>(keys.size()), &copies);
  m.commit(row, keys.data(), static_cast<int64_t>(keys.size()));
  return copies;
}

void release_all(KvCacheManager& m) {
  for (int64_t r = 0; r < m.rows(); ++r) m.release(r);
  EXPECT_EQ(m.referenced(), 0);
  EXPECT_EQ(m.available(), m.capacity());
}

TEST(BlockAllocator, CountsReferencesAndReusesTheLastFreedBlockFirst) {
  BlockAllocator a;
  a.grow(3);
  EXPECT_EQ(a.take(), 0);
  EXPECT_EQ(a.take(), 1);
  a.ref(1);
  EXPECT_FALSE(a.unref(1));
  EXPECT_TRUE(a.unref(1));
  a.free(1);
  EXPECT_EQ(a.take(), 1);  // warm memory first
  a.grow(2);               // new blocks go under the free ones
  EXPECT_EQ(a.take(), 2);
  EXPECT_EQ(a.take(), 3);
  EXPECT_EQ(a.take(), 4);
  EXPECT_EQ(a.take(), -1);
  EXPECT_EQ(a.referenced(), 5);
  EXPECT_THROW(a.free(0), Error);  // still referenced
  for (int32_t b = 0; b < 5; ++b) EXPECT_TRUE(a.unref(b));
  EXPECT_THROW(a.unref(0), Error);  // released more often than taken
  EXPECT_EQ(a.referenced(), 0);
}

TEST(KvCacheManager, RowsTakeBlocksAsTheyGrowAndGiveThemBack) {
  auto m = make(4, 8, 2);
  write(m, 0, iota_keys(5));  // 2 blocks
  write(m, 1, iota_keys(4, 100));  // 1 full block
  EXPECT_EQ(m.table(0).blocks.size(), 2u);
  EXPECT_EQ(m.table(0).slots, 5);
  EXPECT_EQ(m.referenced(), 3);
  write(m, 1, {7});
  EXPECT_EQ(m.table(1).blocks.size(), 2u);
  EXPECT_EQ(m.blocks_to_write({0}, {3}), 0);  // slots 5..7 fit the second block
  EXPECT_EQ(m.blocks_to_write({0}, {4}), 1);
  release_all(m);
}

TEST(KvCacheManager, AForkSharesBlocksAndCopiesOnlyTheBlockItWrites) {
  auto m = make(4, 16, 4);
  write(m, 0, iota_keys(10));  // blocks: full, full, 2 of 4
  m.fork({1, 2}, {0, 0});
  EXPECT_EQ(m.referenced(), 3);  // no block copied to fork
  for (int32_t b : m.table(0).blocks) EXPECT_EQ(m.refs(b), 3);
  // Each row writes its next token: the shared partial block is copied for two of them; the third
  // (the last holder) writes in place. Full blocks stay shared.
  EXPECT_EQ(m.blocks_to_write({0, 1, 2}, {1, 1, 1}), 2);
  std::vector<BlockCopy> copies;
  for (int64_t r : {0, 1, 2}) {
    m.prepare_write(r, 1, &copies);
    const int32_t t = static_cast<int32_t>(50 + r);
    m.commit(r, &t, 1);
  }
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, copies[1].src);
  EXPECT_NE(copies[0].dst, copies[1].dst);
  EXPECT_EQ(m.stats().block_copies, 2);
  EXPECT_EQ(m.table(0).blocks[0], m.table(2).blocks[0]);
  std::set<int32_t> last = {m.table(0).blocks[2], m.table(1).blocks[2], m.table(2).blocks[2]};
  EXPECT_EQ(last.size(), 3u);
  EXPECT_EQ(m.referenced(), 5);
  // A fork onto itself, and a beam reordering that swaps rows, keep every count right.
  m.fork({0, 1}, {1, 0});
  m.fork({2}, {2});
  EXPECT_EQ(m.referenced(), 5);
  release_all(m);
}

TEST(KvCacheManager, AtABlockBoundaryAForkTakesNewBlocksNotCopies) {
  auto m = make(4, 8, 2);
  write(m, 0, iota_keys(8));
  m.fork({1}, {0});
  EXPECT_TRUE(write(m, 0, {1}).empty());
  EXPECT_TRUE(write(m, 1, {2}).empty());
  EXPECT_EQ(m.referenced(), 4);
  release_all(m);
}

TEST(KvCacheManager, FullBlocksAreFoundAgainByTheirKeysFromSlotZero) {
  const int64_t bs = 4;
  auto m = make(bs, 32, 4);
  const auto keys = iota_keys(13);  // 3 full blocks and one slot
  write(m, 0, keys);
  EXPECT_EQ(m.cached(), 3);
  // The same keys: the full blocks, except that at least the last slot is left to run.
  EXPECT_EQ(m.match(keys, 12).blocks, 3);
  EXPECT_EQ(m.match(keys, 11).blocks, 2);
  EXPECT_EQ(m.match(std::vector<int32_t>(keys.begin(), keys.begin() + 12), 11).blocks, 2);
  // One key apart at slot 6: the first block only. Apart at slot 0: nothing.
  auto other = keys;
  other[6] = 999;
  EXPECT_EQ(m.match(other, 12).blocks, 1);
  other = keys;
  other[0] = 999;
  EXPECT_EQ(m.match(other, 12).blocks, 0);
  // Equal up to a block boundary, then different: the blocks before it.
  other = keys;
  for (size_t i = 8; i < other.size(); ++i) other[i] += 100;
  EXPECT_EQ(m.match(other, 12).blocks, 2);
  // The same block contents after a different first block are another chain.
  auto shifted = keys;
  shifted[1] = 77;
  write(m, 1, shifted);
  EXPECT_EQ(m.cached(), 6);
  EXPECT_EQ(m.attach(2, other, 12), 2 * bs);
  EXPECT_EQ(m.table(2).blocks[0], m.table(0).blocks[0]);
  EXPECT_EQ(m.refs(m.table(0).blocks[0]), 2);
  // The row goes on from there; its third block is its own (the cache holds another for them).
  write(m, 2, std::vector<int32_t>(other.begin() + 8, other.end()));
  EXPECT_NE(m.table(2).blocks[2], m.table(0).blocks[2]);
  EXPECT_EQ(m.stats().prefix_blocks, 2);
  release_all(m);
  EXPECT_EQ(m.cached(), 7);  // the third row's full block too
}

TEST(KvCacheManager, UnusedCachedBlocksStayUntilMemoryIsNeededThenTheLeastRecentGoes) {
  const int64_t bs = 2;
  auto m = make(bs, 4, 3);
  write(m, 0, {1, 2, 3, 4});  // two cached blocks: A=[1 2], B=[3 4]
  m.release(0);
  EXPECT_EQ(m.available(), 4);
  EXPECT_EQ(m.cached(), 2);
  // A later prompt with the same start takes them back (they leave the LRU).
  EXPECT_EQ(m.match({1, 2, 3, 4, 5}, 4).parked, 2);
  EXPECT_EQ(m.attach(1, {1, 2, 3, 4, 5}, 4), 4);
  EXPECT_EQ(m.available(), 2);
  m.release(1);
  // Filling the pool: free blocks first, then cached ones, the sequence's tail (B) before its head.
  write(m, 2, {9, 9, 8});
  EXPECT_EQ(m.stats().evictions, 0);
  write(m, 2, {8, 7});
  EXPECT_EQ(m.stats().evictions, 1);
  EXPECT_EQ(m.match({1, 2, 3, 4, 5}, 4).blocks, 1);  // A is still cached, B is gone
  write(m, 2, {6, 5});
  EXPECT_EQ(m.stats().evictions, 2);
  EXPECT_EQ(m.available(), 0);
  EXPECT_EQ(m.blocks_to_write({2}, {2}), 1);
  std::vector<BlockCopy> copies;
  EXPECT_THROW(m.prepare_write(2, 2, &copies), Error);  // the pool is full: an error, not a wrong block
  release_all(m);
}

TEST(KvCacheManager, CircularRowsReuseTheirBlocksAndShareNothing) {
  auto m = make(4, 8, 2, /*ring=*/6);
  EXPECT_FALSE(m.sharing());
  write(m, 0, iota_keys(6));  // blocks for ring slots 0-3 and 4-5
  EXPECT_EQ(m.table(0).blocks.size(), 2u);
  for (int i = 0; i < 9; ++i) write(m, 0, {i});  // around the ring again and again
  EXPECT_EQ(m.table(0).blocks.size(), 2u);
  EXPECT_EQ(m.cached(), 0);
  m.fork({1}, {0});
  EXPECT_EQ(write(m, 1, {5}).size(), 1u);  // slot 15: ring slot 3, the shared first block
  release_all(m);
}

TEST(KvCacheBudget, ParsesBytesFractionsAndAuto) {
  EXPECT_FALSE(KvCacheBudget::parse("auto").fixed());
  const auto g = KvCacheBudget::parse("2G");
  EXPECT_EQ(g.kind, KvCacheBudget::Kind::kBytes);
  EXPECT_EQ(g.value, 2.0 * (1 << 30));
  EXPECT_EQ(KvCacheBudget::parse("512MiB").value, 512.0 * (1 << 20));
  EXPECT_EQ(KvCacheBudget::parse("1000000").value, 1e6);
  const auto f = KvCacheBudget::parse("0.25");
  EXPECT_EQ(f.kind, KvCacheBudget::Kind::kFraction);
  EXPECT_EQ(f.blocks(100, 1000), 2);  // 250 bytes of 1000
  EXPECT_EQ(g.blocks(1 << 20, 0), 2048);
  // A plain number above 1 counts bytes: 1.5 is a mistake (1.5G meant?), not 1 byte.
  for (const char* bad : {"", "-1", "0", "lots", "3X", "nan", "1.5", "2.25"}) {
    try {
      KvCacheBudget::parse(bad);
      FAIL() << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--kv-cache-memory ") + bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ftx::kv
