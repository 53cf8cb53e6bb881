// GPU twin of engine_prompt_test (label gpu; skips without a CUDA device or a CUDA build): the
// p-tuning substitution and the prefix prompts on the CUDA backend (fp32) give the float64
// reference's logits within 1e-4 and the CPU backend's within 1e-5, for the mixed batch of tasks.
// Prefix prompts also in a half KV cache (fp16, the CUDA default, and bf16: the engine stores the
// prefix K/V rounded to the cache's dtype), within the half engines' tolerance of the CPU's fp32
// run (1e-2 and 4e-2 of the row, as cuda_backend_test's CudaEngineHalf).
#include <gtest/gtest.h>

#include "engine_prompt_util.h"
#include "gpu_test_util.h"
#include "lib/ops/backend.h"

namespace ftx {
namespace {

TEST(EnginePromptTuningGpu, CudaMatchesCpuAndReference) {
  REQUIRE_CUDA_DEVICE();  // the shared rule: skip only without a GPU, fail on a broken driver
  const std::string fx = test::prompt_fixtures(), eng = test::engine_fixtures();
  dist::SingleRank single;
  for (const auto& m : test::prompt_models()) {
    SCOPED_TRACE(m);
    for (bool prefix : {false, true}) {
    SCOPED_TRACE(prefix ? "prefix prompts" : "p-tuning");
    const auto e = test::load(fx, m, prefix);
    const std::string dir =
        prefix ? fx + "/prefix/" + m + "/1-gpu" : test::folder_with_tables(eng + "/" + m + "/1-gpu", fx);
    std::vector<size_t> all;
    for (size_t i = 0; i < e.ids.size(); ++i) all.push_back(i);
    auto gpu = ops::make_backend("cuda", 1);
    const auto got = test::run_paths(dir, e, all, single, gpu.get());
    const auto cpu = test::run_paths(dir, e, all, single);
    if (!prefix) std::filesystem::remove_all(dir);
    for (size_t i = 0; i < all.size(); ++i)
      for (size_t s = 0; s < got[i].size(); ++s) {
        EXPECT_TRUE(test::logits_close(got[i][s].data(), e.greedy_logits[i][s].data(), e.vocab, 1e-4))
            << "request " << i << " step " << s;
        EXPECT_TRUE(test::logits_close(got[i][s].data(), cpu[i][s].data(), e.vocab, 1e-5))
            << "request " << i << " step " << s;
      }
    }
  }
}

TEST(EnginePromptTuningGpu, PrefixPromptsInAHalfKvCache) {
  REQUIRE_CUDA_DEVICE();
  const std::string fx = test::prompt_fixtures();
  dist::SingleRank single;
  for (const auto& m : test::prompt_models())
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(m + " " + dtype_name(t));
      const auto e = test::load(fx, m, true);
      const std::string dir = fx + "/prefix/" + m + "/1-gpu";
      std::vector<size_t> all;
      for (size_t i = 0; i < e.ids.size(); ++i) all.push_back(i);
      auto gpu = ops::make_backend("cuda", 1, t);
      ASSERT_EQ(gpu->kv_dtype(), t);
      const auto got = test::run_paths(dir, e, all, single, gpu.get());
      const auto cpu = test::run_paths(dir, e, all, single);
      for (size_t i = 0; i < all.size(); ++i)
        for (size_t s = 0; s < got[i].size(); ++s)
          EXPECT_TRUE(test::logits_close(got[i][s].data(), cpu[i][s].data(), e.vocab,
                                         t == DType::kFloat16 ? 1e-2 : 4e-2))
              << "request " << i << " step " << s;
    }
}

}  // namespace
}  // namespace ftx
