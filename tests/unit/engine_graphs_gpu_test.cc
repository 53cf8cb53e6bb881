// What ships by default on CUDA, end to end (label gpu; skips without a device):
//  * CudaGraphsHalf: decode steps as CUDA graphs in the half models (fp16, the default, and bf16;
//    half activations and KV cache), in paged blocks of 4 tokens (every row spans many blocks), in
//    rows of 1024 slots, so decode attention splits each (row, head)'s keys over several blocks
//    (batch × heads is below the SM count) and merges them: every replayed step equals the eager
//    step bit for bit (the graph holds the same kernels), across a beam-style copy_rows and a
//    shrinking batch; and whole generations with device top-k/top-p sampling between the replays
//    give the eager run's tokens, and the same tokens again.
//  * CudaEngineLong: prompts of 700 and 300 tokens in rows of 1024 slots, so that three of the four
//    splits of the longer row hold keys: the fp32 engine against the CPU's (logits within 1e-4 of
//    the row, greedy tokens up to near ties), for rotary, ALiBi and parallel-residual models.
//  * CudaGraphs: fp32 decode steps as graphs equal eager launches bit for bit, over a shrinking
//    batch, a beam-style copy_rows and a second reserve() (whose new buffers old graphs must not use).
//  * CudaGraphScratch: growing the backend's scratch buffer retires the graphs that hold its address.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine_test_util.h"
#include "gpu_test_util.h"
#include "graph_steps_test_util.h"
#include "lib/engine/scheduler.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/cuda_backend.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#endif

namespace ftx {
namespace {

constexpr int64_t kLongRow = 1024;

#ifdef FTX_HAVE_CUDA

std::unique_ptr<ops::Backend> cuda_backend(DType t, bool graphs) {
  cuda::CudaBackendOptions o;
  o.weight_dtype = t;
  o.graphs = graphs;
  return cuda::make_cuda_backend(o);
}

EngineOptions paged() {
  EngineOptions o;
  o.block_size = 4;
  return o;
}

// Every request's tokens from one padded batch of sampled generations (device sampling).
std::vector<std::vector<int32_t>> sampled_tokens(ops::Backend& be, const std::string& dir,
                                                 const std::vector<std::vector<int32_t>>& prompts) {
  dist::SingleRank comm;
  auto w = ModelWeights::load(dir + "/1-gpu", 0, 1, be);
  Engine eng(w, be, comm, paged());
  SchedulerOptions opt;
  opt.batch_size = static_cast<int64_t>(prompts.size());
  opt.max_seq_len = kLongRow;
  Scheduler scheduler(eng, comm, opt);
  SamplingConfig s;
  s.top_k = 5;
  s.top_p = 0.9;
  s.temperature = 0.8;
  s.seed = 1234;
  std::vector<DecodeRequest> requests;
  for (const auto& p : prompts) requests.push_back({p, 12, s});
  std::vector<std::vector<int32_t>> out;
  for (const auto& o : scheduler.run_all(requests))
    for (const auto& b : o.result.beams) out.push_back(b.output_ids);
  return out;
}

class CudaGraphsHalf : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(CudaGraphsHalf, ReplaysEqualEagerStepsAndSampledTokens) {
  REQUIRE_CUDA_DEVICE();
  const auto& [model, t] = GetParam();
  const std::string dir = test::engine_fixtures() + "/" + model;
  const auto e = test::load_expected(dir);
  auto eager = cuda_backend(t, false), graphed = cuda_backend(t, true);
  const auto* impl = dynamic_cast<const cuda::CudaBackend*>(graphed.get());
  ASSERT_NE(impl, nullptr);
  ASSERT_EQ(graphed->act_dtype(), t);
  dist::SingleRank comm;
  {
    auto we = ModelWeights::load(dir + "/1-gpu", 0, 1, *eager);
    auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *graphed);
    Engine ee(we, *eager, comm, paged()), eg(wg, *graphed, comm, paged());
    const int64_t B = static_cast<int64_t>(e.prompts.size()), V = e.vocab;
    int64_t longest = 0;
    for (const auto& p : e.prompts) longest = std::max<int64_t>(longest, p.size());
    ee.reserve(B + 1, kLongRow, B * longest);
    eg.reserve(B + 1, kLongRow, B * longest);
    test::expect_graph_steps_equal_eager(ee, eg, e.prompts, V, /*steps=*/10, /*shrink_at=*/5);
    EXPECT_GE(impl->graphs_recorded(), 1u);
  }
  const auto want = sampled_tokens(*eager, dir, e.prompts);
  ASSERT_EQ(want.size(), e.prompts.size());
  for (const auto& w : want) EXPECT_EQ(w.size(), 12u);
  EXPECT_EQ(sampled_tokens(*graphed, dir, e.prompts), want) << "sampled tokens with graphs";
  EXPECT_EQ(sampled_tokens(*graphed, dir, e.prompts), want) << "sampled tokens with graphs, again";
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraphsHalf,
                         ::testing::Combine(::testing::Values("gptj", "bloom", "gptneox"),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == DType::kFloat16 ? "_fp16" : "_bf16");
                         });

class CudaEngineLong : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEngineLong, SplitDecodeAttentionMatchesCpu) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  std::mt19937 g(5);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(e.vocab) - 1);
  std::vector<std::vector<int32_t>> prompts = {std::vector<int32_t>(700), std::vector<int32_t>(300)};
  for (auto& p : prompts)
    for (int32_t& x : p) x = id(g);
  auto cpu = ops::make_backend("cpu", 1);
  auto gpu = ops::make_backend("cuda", 1);
  dist::SingleRank comm;
  auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
  EngineOptions o;
  o.block_size = 16;
  Engine ec(wc, *cpu, comm, o), eg(wg, *gpu, comm, o);
  ec.reserve(2, kLongRow, 1000);
  eg.reserve(2, kLongRow, 1000);
  const auto ref = test::greedy_traces(ec, prompts, 6, /*alone=*/false);
  const auto got = test::greedy_traces(eg, prompts, 6, /*alone=*/false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(test::same_tokens_up_to_ties(ref[i], got[i].tokens, 1e-4)) << "prompt " << i;
    for (size_t s = 0; s < ref[i].logits.size(); ++s) {  // while both decode the same history
      EXPECT_TRUE(test::logits_close(got[i].logits[s].data(), ref[i].logits[s].data(), e.vocab, 1e-4))
          << "prompt " << i << " step " << s;
      if (got[i].tokens[s] != ref[i].tokens[s]) break;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngineLong, ::testing::Values("gptj", "bloom", "gptneox"),
                         [](const auto& info) { return info.param; });

// Decode steps as CUDA graphs (CudaBackendOptions::graphs) give the same bits as eager launches:
// the graph holds the same kernels in the same order. Over several steps with the batch shrinking
// (a new key: measured, captured, replayed), a beam-style copy_rows between steps, and a second
// reserve() (new buffers: the old graphs must not be replayed).
class CudaGraphs : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGraphs, DecodeStepsEqualEagerLaunches) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  cuda::CudaBackendOptions with_graphs;
  with_graphs.graphs = true;
  auto eager = ops::make_backend("cuda", 1);
  auto graphed = cuda::make_cuda_backend(with_graphs);
  const auto* impl = dynamic_cast<const cuda::CudaBackend*>(graphed.get());
  ASSERT_NE(impl, nullptr);
  ASSERT_TRUE(impl->graphs());
  dist::SingleRank comm;
  auto we = ModelWeights::load(dir + "/1-gpu", 0, 1, *eager);
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *graphed);
  Engine ee(we, *eager, comm), eg(wg, *graphed, comm);
  const int64_t B = static_cast<int64_t>(e.prompts.size()), V = e.vocab;
  int64_t longest = 0;
  for (const auto& p : e.prompts) longest = std::max<int64_t>(longest, p.size());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const int64_t steps = 8;
    ee.reserve(B + 1 + round, longest + steps + 1, B * longest + round);  // round 1 reallocates
    eg.reserve(B + 1 + round, longest + steps + 1, B * longest + round);
    test::expect_graph_steps_equal_eager(ee, eg, e.prompts, V, steps, /*shrink_at=*/4);
    // Each batch size ran 4 times: measured, captured, replayed twice.
    EXPECT_GE(impl->graphs_recorded(), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraphs, ::testing::Values("gpt2", "santacoder", "gptj", "bloom"),
                         [](const auto& info) { return info.param; });

// Growing the scratch buffer retires the recorded graphs, which hold its old address (the arena may
// hand that memory to the next allocation): when it grows outside a step, and when it grows inside
// a capture (then the graphs go when the capture ends). A step that copies through scratch (an
// overlapping copy) stays right, and memory allocated after a growth is not written by a replay.
TEST(CudaGraphScratch, GrowingScratchRetiresRecordedGraphs) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaBackendOptions with_graphs;
  with_graphs.graphs = true;
  auto be = cuda::make_cuda_backend(with_graphs);
  const auto* impl = dynamic_cast<const cuda::CudaBackend*>(be.get());
  ASSERT_NE(impl, nullptr);
  const size_t n = 64, big = size_t(1) << 22;
  float* x = be->alloc(2 * big + 1);
  // x[0..len] = 0, 1, ...; the step shifts x[0..len) up by one (memmove); true when it did.
  auto shift_step = [&](const std::string& key, size_t len) {
    std::vector<float> host(len + 1);
    std::iota(host.begin(), host.end(), 0.0f);
    be->upload(x, host.data(), host.size());
    ops::RepeatableStep s(*be, key);
    be->copy(x + 1, x, len);
    s.finish();
    std::vector<float> got(len + 1);
    be->download(got.data(), x, got.size());
    for (size_t i = 1; i <= len; ++i)
      if (got[i] != static_cast<float>(i - 1)) return false;
    return got[0] == 0.0f;
  };
  for (int run = 0; run < 3; ++run) EXPECT_TRUE(shift_step("small", n)) << "run " << run;  // measure, capture, replay
  EXPECT_EQ(impl->graphs_recorded(), 1u);

  be->copy(x + 1, x, big);  // outside a step: scratch grows
  EXPECT_EQ(impl->graphs_recorded(), 0u);
  float* fresh = be->alloc(n);  // may be the old scratch
  be->fill(fresh, -7.0f, n);
  for (int run = 0; run < 3; ++run) EXPECT_TRUE(shift_step("small", n)) << "after growth, run " << run;
  EXPECT_EQ(impl->graphs_recorded(), 1u);
  std::vector<float> f(n);
  be->download(f.data(), fresh, n);
  EXPECT_EQ(f, std::vector<float>(n, -7.0f)) << "a replay wrote into memory allocated after the growth";

  // Inside a capture: measured small, captured large (a copy stages no metadata, so the step
  // passes as the same one): scratch grows during the capture.
  EXPECT_TRUE(shift_step("grows", n));
  EXPECT_TRUE(shift_step("grows", 2 * big));
  EXPECT_EQ(impl->graphs_recorded(), 0u);  // "small" retired; "grows" allocated, so not kept
  EXPECT_TRUE(shift_step("small", n));     // captured again
  EXPECT_TRUE(shift_step("small", n));     // replayed
  EXPECT_EQ(impl->graphs_recorded(), 1u);
  be->release(fresh);
  be->release(x);
}

#else
TEST(CudaGraphsHalf, NotBuilt) { GTEST_SKIP() << "ftx was built without CUDA"; }
#endif

}  // namespace
}  // namespace ftx
