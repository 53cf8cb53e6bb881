// The Engine on CUDA against the CPU engine over the engine fixture models (MHA/MQA, learned/rotary
// both styles/ALiBi, pre/post-LN, parallel residual, gated FFN): identical greedy tokens and logits
// within 1e-4 of the row's largest |logit| (test::logits_close), also after a beam-style
// copy_rows and with no device allocation after reserve(); the INT8 KV cache against its float64
// emulation; session rounds (appends after a cached context, a circular cache). Label gpu: skips
// on a machine without a GPU or a build without CUDA, fails on any other CUDA error or under
// FTX_REQUIRE_GPU=1 (gpu_test_util.h). The ops one by one: backend_ops_test; half models:
// engine_half_gpu_test; graphs: engine_graphs_gpu_test; whole generations and the scheduler:
// scheduler_cuda_gpu_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gpu_test_util.h"
#include "lib/engine/scheduler.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/cuda_backend_impl.h"
#endif

namespace ftx {
namespace {

// The Engine on both backends over the fixture models: same greedy tokens (each backend picks its
// own argmax; the CPU's token is fed to both so the paths stay comparable), logits within 1e-4,
// including after a beam-style copy_rows; and no device allocation after reserve().
class CudaEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEngine, GreedyMatchesCpu) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
  dist::SingleRank comm;
  auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
  Engine ec(wc, *cpu, comm), eg(wg, *gpu, comm);
  const int64_t B = static_cast<int64_t>(e.prompts.size()), V = e.vocab, steps = 6;
  int64_t longest = 0;
  for (const auto& p : e.prompts) longest = std::max<int64_t>(longest, p.size());
  // One spare row for copy_rows.
  ec.reserve(B + 1, longest + steps + 1, B * longest);
  eg.reserve(B + 1, longest + steps + 1, B * longest);
  std::vector<int32_t> rows(B);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> lc(B * V), lg(B * V);
  ec.prefill(e.prompts, rows, lc.data());
  eg.prefill(e.prompts, rows, lg.data());
#ifdef FTX_HAVE_CUDA
  const auto* impl = dynamic_cast<const cuda::CudaBackend*>(gpu.get());
  ASSERT_NE(impl, nullptr);
  const size_t blocks_after_prefill = impl->arena().blocks();
#endif
  auto argmax = [V](const float* l) { return static_cast<int32_t>(std::max_element(l, l + V) - l); };
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int32_t> tokens(B);
    for (int64_t b = 0; b < B; ++b) {
      EXPECT_TRUE(test::logits_close(lg.data() + b * V, lc.data() + b * V, V, 1e-4))
          << "prompt " << b << " step " << s;
      tokens[b] = argmax(lc.data() + b * V);
      EXPECT_EQ(argmax(lg.data() + b * V), tokens[b]) << "prompt " << b << " step " << s;
    }
    if (s == 2) {  // beam fan-out: the spare row takes row 1's history
      ec.copy_rows({static_cast<int32_t>(B)}, {1});
      eg.copy_rows({static_cast<int32_t>(B)}, {1});
    }
    std::vector<int32_t> feed = tokens, active = rows;
    if (s >= 2) {
      feed.push_back(tokens[1]);
      active.push_back(static_cast<int32_t>(B));
    }
    std::vector<float> c2(feed.size() * V), g2(feed.size() * V);
    ec.decode(feed, active, c2.data());
    eg.decode(feed, active, g2.data());
    for (size_t i = B; i < feed.size(); ++i)  // the copied row: CPU vs CUDA
      EXPECT_TRUE(test::logits_close(g2.data() + i * V, c2.data() + i * V, V, 1e-4)) << "copied row, step " << s;
    std::copy(c2.begin(), c2.begin() + B * V, lc.begin());
    std::copy(g2.begin(), g2.begin() + B * V, lg.begin());
  }
#ifdef FTX_HAVE_CUDA
  EXPECT_EQ(impl->arena().blocks(), blocks_after_prefill) << "decode steps allocated new device blocks";
#endif
}

// The INT8 KV cache on the GPU: logits along the float64 emulation's greedy paths within 1e-4 of
// it (tests/reference/int8_kv_reference.py; the CPU's own check is EngineReference), same tokens.
TEST_P(CudaEngine, Int8KvCacheMatchesEmulation) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir, "int8_kv_cache/fp");
  if (e.prompts.empty()) GTEST_SKIP() << "no int8 KV-cache reference for " << GetParam();
  auto gpu = ops::make_backend("cuda", 1);
  QuantPolicy int8_kv;
  int8_kv.int8_kv_cache = true;
  dist::SingleRank comm;
  const auto o = test::run_greedy_paths_on(*gpu, dir + "/1-gpu", e, comm, {}, int8_kv);
  test::expect_greedy_paths_match(o, e, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngine, ::testing::ValuesIn(test::engine_model_names()),
                         [](const auto& info) { return info.param; });

// A session round on the GPU: the logits after appending round 2 to a row's cached context, and
// with a circular cache after wrapping it, equal the CPU engine's (1e-4).
class CudaSessions : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSessions, AppendAndCircularCacheMatchCpu) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  for (const int64_t memory : {int64_t(0), int64_t(8)}) {
    SCOPED_TRACE("memory_len " + std::to_string(memory));
    auto cpu = ops::make_backend("cpu", 1);
    auto gpu = ops::make_backend("cuda", 1);
    dist::SingleRank comm;
    auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
    auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
    Engine ec(wc, *cpu, comm, EngineOptions{memory}), eg(wg, *gpu, comm, EngineOptions{memory});
    const int64_t V = e.vocab;
    ec.reserve(1, 64, 64);
    eg.reserve(1, 64, 64);
    std::vector<float> lc(V), lg(V);
    ec.prefill({e.prompts[1]}, {0}, lc.data());
    eg.prefill({e.prompts[1]}, {0}, lg.data());
    EXPECT_TRUE(test::logits_close(lg.data(), lc.data(), V, 1e-4));
    for (const auto& round : {e.prompts[2], e.prompts[0], e.prompts[3]}) {
      ec.append({round}, {0}, lc.data());
      eg.append({round}, {0}, lg.data());
      EXPECT_TRUE(test::logits_close(lg.data(), lc.data(), V, 1e-4)) << "after " << ec.row_length(0) << " tokens";
      const int32_t t = static_cast<int32_t>(std::max_element(lc.begin(), lc.end()) - lc.begin());
      ec.decode({t}, {0}, lc.data());
      eg.decode({t}, {0}, lg.data());
      EXPECT_TRUE(test::logits_close(lg.data(), lc.data(), V, 1e-4));
    }
    EXPECT_EQ(eg.row_length(0), ec.row_length(0));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaSessions, ::testing::Values("gpt2", "gptneox", "bloom"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ftx
