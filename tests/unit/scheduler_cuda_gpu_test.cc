// Whole generations and the scheduler on CUDA (label gpu; skips without a GPU, gpu_test_util.h):
// beam search and seeded sampling are deterministic, a padded batch gives each request what it gets
// alone and greedy tokens follow the CPU engine's path; continuous batching, preemption and a shared
// prefix in the paged cache give each request its tokens alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gpu_test_util.h"
#include "lib/engine/scheduler.h"
#include "lib/ops/backend.h"

namespace ftx {
namespace {

// Whole generations on the GPU: beam search (3 beams, diversity and length penalty) and seeded
// top-k/top-p sampling give the same tokens on a second run, in fp32 and fp16; in fp32 a padded
// batch gives each request what it gets alone (greedy), and the greedy tokens equal the CPU's.
class CudaGenerate : public ::testing::TestWithParam<std::string> {};

std::vector<GenerationOutput> generate_on(ops::Backend& be, const std::string& dir,
                                          const std::vector<DecodeRequest>& requests) {
  dist::SingleRank comm;
  auto w = ModelWeights::load(dir + "/1-gpu", 0, 1, be);
  Engine eng(w, be, comm);
  SchedulerOptions opt;
  opt.batch_size = static_cast<int64_t>(requests.size());  // one padded batch
  Scheduler scheduler(eng, comm, opt);
  return scheduler.run_all(requests);
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<GenerationOutput>& outs) {
  std::vector<std::vector<int32_t>> t;
  for (const auto& o : outs)
    for (const auto& b : o.result.beams) t.push_back(b.output_ids);
  return t;
}

TEST_P(CudaGenerate, DeterministicAndBatchIndependent) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  const auto e = test::load_expected(dir);
  auto requests_with = [&](SamplingConfig s) {
    std::vector<DecodeRequest> r;
    for (const auto& p : e.prompts) r.push_back({p, 6, s});
    return r;
  };
  SamplingConfig beam;
  beam.beam_width = 3;
  beam.beam_search_diversity_rate = 0.5;
  beam.len_penalty = 1.0;
  SamplingConfig sample;
  sample.top_k = 5;
  sample.top_p = 0.9;
  sample.temperature = 0.8;
  sample.seed = 1234;
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    auto gpu = ops::make_backend("cuda", 1, t);
    for (const SamplingConfig& s : {beam, sample}) {
      const auto first = tokens_of(generate_on(*gpu, dir, requests_with(s)));
      const auto second = tokens_of(generate_on(*gpu, dir, requests_with(s)));
      // Every beam of every request made its 6 tokens (no end_id), so equality is not vacuous.
      ASSERT_EQ(first.size(), e.prompts.size() * static_cast<size_t>(s.beam_width));
      for (const auto& t : first) EXPECT_EQ(t.size(), 6u);
      EXPECT_EQ(first, second) << (s.beam_width > 1 ? "beam search" : "sampling") << " differs between runs";
    }
  }
  // Greedy: the CUDA engine's padded batch and each prompt alone (other GEMM shapes) follow the CPU
  // engine's path, up to near ties (within the fp32 logit tolerance, 1e-4 of the row) that another
  // summation order may break the other way.
  auto gpu = ops::make_backend("cuda", 1);
  auto cpu = ops::make_backend("cpu", 1);
  dist::SingleRank comm;
  auto wg = ModelWeights::load(dir + "/1-gpu", 0, 1, *gpu);
  auto wc = ModelWeights::load(dir + "/1-gpu", 0, 1, *cpu);
  Engine eg(wg, *gpu, comm), ec(wc, *cpu, comm);
  const auto ref = test::greedy_traces(ec, e.prompts, 6, /*alone=*/false);
  const auto batch = test::greedy_traces(eg, e.prompts, 6, /*alone=*/false);
  const auto alone = test::greedy_traces(eg, e.prompts, 6, /*alone=*/true);
  for (size_t i = 0; i < e.prompts.size(); ++i) {
    EXPECT_TRUE(test::same_tokens_up_to_ties(ref[i], batch[i].tokens, 1e-4)) << "prompt " << i << " in the batch";
    EXPECT_TRUE(test::same_tokens_up_to_ties(ref[i], alone[i].tokens, 1e-4)) << "prompt " << i << " alone";
    EXPECT_TRUE(test::logits_close(batch[i].logits[0].data(), ref[i].logits[0].data(), e.vocab, 1e-4));
    EXPECT_TRUE(test::logits_close(alone[i].logits[0].data(), batch[i].logits[0].data(), e.vocab, 1e-4));
  }
  // The scheduler's greedy requests (a padded batch of them) take the engine's path too.
  const auto scheduled = tokens_of(generate_on(*gpu, dir, requests_with(SamplingConfig{})));
  for (size_t i = 0; i < e.prompts.size(); ++i)
    EXPECT_TRUE(test::same_tokens_up_to_ties(ref[i], scheduled[i], 1e-4)) << "prompt " << i << " scheduled";
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGenerate, ::testing::Values("gpt2", "gptj", "bloom", "santacoder"),
                         [](const auto& info) { return info.param; });

// Continuous batching on the GPU: requests of different lengths and parameters, run 3 at a time
// with finished rows refilled at once, get the tokens each gets alone (fp32).
TEST(CudaScheduler, ContinuousBatchingEqualsOneByOne) {
  REQUIRE_CUDA_DEVICE();
  const std::string dir = test::engine_fixtures() + "/gptneox/1-gpu";
  auto gpu = ops::make_backend("cuda", 1);
  dist::SingleRank comm;
  auto w = ModelWeights::load(dir, 0, 1, *gpu);
  std::vector<DecodeRequest> reqs;
  for (int i = 0; i < 12; ++i) {
    DecodeRequest r;
    for (int t = 0; t <= i % 5; ++t) r.input_ids.push_back(3 + 17 * i + 5 * t);
    r.max_new_tokens = 2 + (7 * i) % 11;
    r.sampling.seed = static_cast<uint64_t>(i);
    if (i % 3 == 1) r.sampling.top_p = 0.9;
    if (i % 4 == 2) r.sampling.top_k = 5;
    reqs.push_back(r);
  }
  auto run = [&](int64_t batch) {
    Engine eng(w, *gpu, comm);
    SchedulerOptions o;
    o.batch_size = batch;
    Scheduler s(eng, comm, o);
    return s.run_all(reqs);
  };
  const auto alone = run(1), together = run(3);
  // Greedy requests (neither top-k nor top-p): each run follows the CPU engine's path of the request
  // alone, up to near ties another GEMM shape may break the other way (1e-4 of the row). Sampled
  // ones: the same tokens; a flip there needs a uniform draw within rounding (~1e-6) of a boundary
  // of the cumulative distribution, which these few dozen draws do not come near.
  auto cpu = ops::make_backend("cpu", 1);
  auto wc = ModelWeights::load(dir, 0, 1, *cpu);
  Engine ec(wc, *cpu, comm);
  auto expect_same = [&](const std::vector<DecodeRequest>& rs, const std::vector<GenerationOutput>& x,
                         const std::vector<GenerationOutput>& y, const char* what) {
    for (size_t i = 0; i < rs.size(); ++i) {
      const auto& t = x[i].result.beams[0].output_ids;
      const auto& a = y[i].result.beams[0].output_ids;
      if (rs[i].sampling.top_k == 0 && rs[i].sampling.top_p == 0.0) {
        const auto ref = test::greedy_traces(ec, {rs[i].input_ids}, rs[i].max_new_tokens, true)[0];
        EXPECT_TRUE(test::same_tokens_up_to_ties(ref, t, 1e-4)) << what << " request " << i;
        EXPECT_TRUE(test::same_tokens_up_to_ties(ref, a, 1e-4)) << what << " request " << i;
      } else {
        EXPECT_EQ(t, a) << what << " request " << i;
      }
    }
  };
  expect_same(reqs, together, alone, "batched and alone:");
  // The paged cache on the GPU: 16 tokens per block, a budget of a few requests' blocks (requests
  // preempted and prefilled again), a prefix the requests share: the same tokens with and without
  // the budget, greedy ones the CPU engine's up to ties (a resumed request's prefill is another GEMM shape).
  std::vector<DecodeRequest> shared = reqs;
  for (auto& r : shared) r.input_ids.insert(r.input_ids.begin(), 40, 7);
  auto paged = [&](bool budget) {
    EngineOptions eo;
    eo.block_size = 16;
    if (budget) {
      Engine probe(w, *gpu, comm, eo);
      eo.kv_cache.kind = kv::KvCacheBudget::Kind::kBytes;
      eo.kv_cache.value = static_cast<double>(8 * probe.kv_block_bytes());
    }
    Engine eng(w, *gpu, comm, eo);
    SchedulerOptions o;
    o.batch_size = 6;
    Scheduler s(eng, comm, o);
    auto out = s.run_all(shared);
    EXPECT_EQ(eng.kv_cache().referenced(), 0);
    if (budget) EXPECT_GT(s.stats().preemptions, 0);
    EXPECT_GT(eng.tokens_reused(), 0);
    return out;
  };
  const auto roomy = paged(false), tight = paged(true);
  expect_same(shared, tight, roomy, "paged, preempted and not:");
}

}  // namespace
}  // namespace ftx
