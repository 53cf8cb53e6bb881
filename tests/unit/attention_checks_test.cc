// The CUDA attention ops' host checks (kernels/cuda_backend/attention_checks.h) on the CPU: they need
// no device, only a CUDA build. An append that would wrap a circular cache is refused like the CPU
// backend refuses it, also when max_seq (whole blocks) exceeds memory_len; a block id at or past the
// cache's blocks is refused (the upper bound was never checked); sizes give whole blocks.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "formats/error.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/attention_checks.h"
#endif

namespace ftx {
namespace {

#ifdef FTX_HAVE_CUDA

template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

ops::AttentionShape shape(int64_t max_seq, int64_t memory_len) {
  ops::AttentionShape sh;
  sh.q_heads = sh.kv_heads = 2;
  sh.head_dim = 8;
  sh.block_size = 8;
  sh.max_seq = max_seq;
  sh.memory_len = memory_len;
  return sh;
}

TEST(AttentionChecks, AnAppendNeverWrapsTheCircularCache) {
  const auto sh = shape(16, 12);  // two blocks of 8 slots hold a circular cache of 12
  const std::vector<int32_t> lengths = {4, 3};
  for (int32_t p : {10, 11, 13}) {
    const std::vector<int32_t> past = {0, p};
    const std::string m = message_of([&] { cuda::check_append_slots(lengths.data(), past.data(), 2, 4, sh); });
    EXPECT_NE(m.find("row 1's positions " + std::to_string(p) + ".." + std::to_string(p + 2) +
                     " wrap the circular cache of 12"),
              std::string::npos)
        << m;
  }
  const std::vector<int32_t> past = {8, 9};  // 8..11 and 9..11: within 12
  EXPECT_NO_THROW(cuda::check_append_slots(lengths.data(), past.data(), 2, 4, sh));
  EXPECT_NO_THROW(cuda::check_append_slots(lengths.data(), nullptr, 2, 4, sh));
  // Without a circular cache the row's slots are the bound.
  const auto open = shape(16, 0);
  const std::vector<int32_t> late = {12, 13};  // to slot 15, the last
  EXPECT_NO_THROW(cuda::check_append_slots(lengths.data(), late.data(), 2, 4, open));
  const std::vector<int32_t> beyond = {12, 14};
  EXPECT_NE(message_of([&] { cuda::check_append_slots(lengths.data(), beyond.data(), 2, 4, open); })
                .find("row 1 appends 3 tokens after 14"),
            std::string::npos);
  // Decode wraps a circular cache (any slot); otherwise the row's slots are the bound.
  const std::vector<int32_t> far = {3, 1000};
  EXPECT_NO_THROW(cuda::check_decode_slots(far.data(), 2, sh));
  EXPECT_NE(message_of([&] { cuda::check_decode_slots(far.data(), 2, open); }).find("writes slot 1000"),
            std::string::npos);
}

// A negative sliding window or a softcap that is negative or not finite is refused by name; 0 is off.
TEST(AttentionChecks, WindowAndSoftcapAreZeroOrPositive) {
  auto sh = shape(16, 0);
  const std::vector<int32_t> ids = {0, 1};
  const ops::BlockTables tables{ids.data(), 2};
  EXPECT_NO_THROW(cuda::check_attention_shape(sh, tables, "decode_attention"));
  sh.window = 5;
  sh.softcap = 50.0f;
  EXPECT_NO_THROW(cuda::check_attention_shape(sh, tables, "decode_attention"));
  sh.window = -1;
  EXPECT_NE(message_of([&] { cuda::check_attention_shape(sh, tables, "decode_attention"); })
                .find("CUDA decode_attention: sliding window -1 is negative"),
            std::string::npos);
  sh.window = 0;
  for (float cap : {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    sh.softcap = cap;
    EXPECT_NE(message_of([&] { cuda::check_attention_shape(sh, tables, "context_attention"); })
                  .find("CUDA context_attention: softcap"),
              std::string::npos)
        << cap;
  }
}

TEST(AttentionChecks, BlockIdsWithinTheCache) {
  const std::vector<int32_t> ids = {0, 2, 1, 3};
  const ops::BlockTables tables{ids.data(), 2};
  EXPECT_NO_THROW(cuda::check_block_ids(tables, 2, 4, "decode_attention"));
  EXPECT_NO_THROW(cuda::check_block_ids(tables, 2, -1, "decode_attention"));  // size unknown
  EXPECT_NE(message_of([&] { cuda::check_block_ids(tables, 2, 3, "decode_attention"); })
                .find("CUDA decode_attention: block id 3 in row 1's table (the cache holds 3 blocks)"),
            std::string::npos);
  const std::vector<int32_t> negative = {0, -1};
  EXPECT_NE(message_of([&] { cuda::check_block_ids({negative.data(), 2}, 1, 4, "context_attention"); })
                .find("block id -1 in row 0's table"),
            std::string::npos);
  // Whole blocks of 2 heads × 8 slots × 8 dims.
  const auto sh = shape(16, 0);
  EXPECT_EQ(cuda::blocks_in_cache(3 * 128 * 4, DType::kFloat32, sh), 3);
  EXPECT_EQ(cuda::blocks_in_cache(3 * 128 * 4 + 100, DType::kFloat32, sh), 3);
  EXPECT_EQ(cuda::blocks_in_cache(5 * 128 * 2, DType::kFloat16, sh), 5);
  EXPECT_EQ(cuda::blocks_in_cache(7 * 128, DType::kInt8, sh), 7);
  EXPECT_EQ(cuda::blocks_in_cache(0, DType::kFloat32, sh), -1);
}

#else
TEST(AttentionChecks, NotBuilt) { GTEST_SKIP() << "ftx was built without CUDA"; }
#endif

}  // namespace
}  // namespace ftx
