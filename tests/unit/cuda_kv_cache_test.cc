// The paged KV cache's edges on CUDA (label gpu; skips without a device):
//  * KvBlockPool::grow past 2 GiB per layer buffer keeps every block: it copies a layer's buffer as
//    one row of its own length, and cudaMemcpy2D refuses pitches over 2^31 - 1 bytes, so the copy
//    must not go through it (CudaBackend::copy_kv_2d);
//  * context_attention refuses an append that would wrap a circular cache, as the CPU does, also
//    when the row's max_seq (whole blocks) is longer than memory_len;
//  * both attention ops refuse a block id at or beyond the blocks the cache holds (the host checks
//    themselves: attention_checks_test, on the CPU);
// and each refusal leaves the backend usable.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "formats/error.h"
#include "gpu_test_util.h"
#include "lib/engine/kv_cache/kv_block_pool.h"
#include "lib/ops/backend.h"

namespace ftx {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CudaKvPool, GrowsPastTwoGiBPerLayerBufferKeepingEveryBlock) {
  REQUIRE_CUDA_DEVICE();
  auto be = ops::make_backend("cuda", 1);  // fp32 cache: 256 KiB per block below
  const int64_t kv_heads = 8, head_dim = 128, block_size = 64;
  kv::KvBlockPool pool(*be, DType::kFloat32, {1.0f}, kv_heads, head_dim, block_size);
  const int64_t be_elems = pool.block_elems();
  const int64_t first = (int64_t(1) << 31) / (be_elems * 4) + 100;  // past 2^31 bytes per buffer
  if (be->available_memory() < static_cast<size_t>(3 * (first + 200) * be_elems * 4))
    GTEST_SKIP() << "needs about " << 3 * (first + 200) * be_elems * 4 / (1 << 30) << " GiB of device memory";
  pool.grow(first);
  ASSERT_GT(first * be_elems * 4, int64_t(INT32_MAX));
  // A mark in the first, a middle and the last block of K and V.
  const std::vector<int64_t> marked = {0, first / 2, first - 1};
  std::vector<float> mark(static_cast<size_t>(be_elems));
  auto fill = [&](int64_t block, int kv) {
    for (int64_t i = 0; i < be_elems; ++i) mark[i] = static_cast<float>(block * 7 + kv) + 1e-3f * static_cast<float>(i % 1000);
  };
  auto at = [&](int kv, int64_t block) {
    return static_cast<float*>((kv == 0 ? pool.k(0) : pool.v(0)).data) + block * be_elems;
  };
  for (int kv = 0; kv < 2; ++kv)
    for (int64_t b : marked) {
      fill(b, kv);
      be->upload(at(kv, b), mark.data(), mark.size());
    }
  ASSERT_NO_THROW(pool.grow(first + 100));
  EXPECT_EQ(pool.blocks(), first + 100);
  std::vector<float> got(static_cast<size_t>(be_elems));
  for (int kv = 0; kv < 2; ++kv)
    for (int64_t b : marked) {
      fill(b, kv);
      be->download(got.data(), at(kv, b), got.size());
      EXPECT_EQ(got, mark) << (kv ? "V" : "K") << " block " << b << " after growing";
    }
  // The new blocks are there to be written.
  fill(first + 99, 0);
  be->upload(at(0, first + 99), mark.data(), mark.size());
  be->download(got.data(), at(0, first + 99), got.size());
  EXPECT_EQ(got, mark);
}

// One fp32 layer cache of `blocks` blocks of the shape.
struct SmallCache {
  ops::Backend& be;
  ops::KvCache k, v;
  SmallCache(ops::Backend& b, const ops::AttentionShape& sh, int64_t blocks) : be(b) {
    k = be.alloc_kv(static_cast<size_t>(blocks * sh.block_elems()));
    v = be.alloc_kv(static_cast<size_t>(blocks * sh.block_elems()));
  }
  ~SmallCache() {
    be.release_kv(k);
    be.release_kv(v);
  }
};

ops::AttentionShape small_shape() {
  ops::AttentionShape sh;
  sh.q_heads = sh.kv_heads = 2;
  sh.head_dim = 8;
  sh.block_size = 8;
  sh.max_seq = 16;  // two blocks per row
  sh.scale = 0.35f;
  return sh;
}

TEST(CudaAttentionRefusals, AnAppendThatWouldWrapTheCircularCache) {
  REQUIRE_CUDA_DEVICE();
  auto be = ops::make_backend("cuda", 1);
  ops::AttentionShape sh = small_shape();
  sh.memory_len = 12;  // max_seq is 16: whole blocks
  SmallCache cache(*be, sh, 2);
  const int64_t S = 4;
  float* qkv = be->alloc(static_cast<size_t>(S * sh.qkv_width()));
  float* out = be->alloc(static_cast<size_t>(S * sh.q_heads * sh.head_dim));
  be->fill(qkv, 0.25f, static_cast<size_t>(S * sh.qkv_width()));
  const std::vector<int32_t> table = {0, 1}, length = {4};
  for (int32_t past : {9, 10, 12}) {  // positions past..past+3 reach 12 or more: the slots would wrap
    const std::string m = message_of(
        [&] { be->context_attention(out, qkv, 1, S, length.data(), {table.data(), 2}, cache.k, cache.v, sh, &past); });
    EXPECT_NE(m.find("wrap the circular cache of 12"), std::string::npos) << "past " << past << ": " << m;
  }
  const int32_t fits = 8, three = 3;  // 8..10: no wrap
  EXPECT_NO_THROW(be->context_attention(out, qkv, 1, S, &three, {table.data(), 2}, cache.k, cache.v, sh, &fits));
  std::vector<float> host(4);
  be->download(host.data(), out, host.size());  // the backend still works, the launch ran
  be->release(qkv);
  be->release(out);
}

TEST(CudaAttentionRefusals, ABlockIdBeyondTheCache) {
  REQUIRE_CUDA_DEVICE();
  auto be = ops::make_backend("cuda", 1);
  const ops::AttentionShape sh = small_shape();
  SmallCache cache(*be, sh, 3);  // blocks 0, 1, 2
  float* qkv = be->alloc(static_cast<size_t>(2 * sh.qkv_width()));
  float* out = be->alloc(static_cast<size_t>(2 * sh.q_heads * sh.head_dim));
  be->fill(qkv, 0.5f, static_cast<size_t>(2 * sh.qkv_width()));
  const std::vector<int32_t> length = {1, 1}, past = {0, 9};
  for (int32_t bad : {3, 4, 1 << 20}) {
    const std::vector<int32_t> table = {0, 1, 2, bad};  // row 1's second block
    const std::string prefill =
        message_of([&] { be->context_attention(out, qkv, 2, 1, length.data(), {table.data(), 2}, cache.k, cache.v, sh); });
    const std::string decode =
        message_of([&] { be->decode_attention(out, qkv, 2, {table.data(), 2}, past.data(), cache.k, cache.v, sh); });
    for (const std::string& m : {prefill, decode})
      EXPECT_NE(m.find("block id " + std::to_string(bad) + " in row 1's table (the cache holds 3 blocks)"),
                std::string::npos)
          << m;
  }
  const std::vector<int32_t> table = {0, 1, 2, 1};
  EXPECT_NO_THROW(be->decode_attention(out, qkv, 2, {table.data(), 2}, past.data(), cache.k, cache.v, sh));
  std::vector<float> host(4);
  be->download(host.data(), out, host.size());
  be->release(qkv);
  be->release(out);
}

}  // namespace
}  // namespace ftx
