// lib/engine/scheduler: continuous and static batching give every request the tokens it gets alone,
// requests of different beam widths and parameters share a run, results come back in input order,
// a bad request and a stop reach the caller, and the engine grows its cache without losing rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "generation_compare.h"
#include "formats/error.h"
#include "lib/engine/scheduler.h"

namespace ftx {
namespace {

struct Model {
  explicit Model(const std::string& name)
      : dir(test::engine_fixtures() + "/" + name + "/1-gpu"), be(2), w(ModelWeights::load(dir, 0, 1, be)),
        eng(w, be, comm) {}
  std::string dir;
  cpu::CpuBackend be;
  dist::SingleRank comm;
  ModelWeights w;
  Engine eng;
};

std::vector<DecodeRequest> mixed_requests(int64_t vocab, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  std::vector<DecodeRequest> out;
  for (int i = 0; i < n; ++i) {
    DecodeRequest r;
    for (int t = pick(1, 9); t > 0; --t) r.input_ids.push_back(pick(1, static_cast<int>(vocab) - 2));
    r.max_new_tokens = pick(1, 14);
    SamplingConfig& s = r.sampling;
    s.seed = static_cast<uint64_t>(i);
    s.end_id = i % 4 == 0 ? pick(1, static_cast<int>(vocab) - 2) : -1;
    s.return_log_probs = true;
    switch (i % 5) {
      case 1: s.top_k = 4; break;
      case 2: s.top_p = 0.8; break;
      case 3: s.repetition_penalty = 1.4; break;
      case 4: s.temperature = 0.6, s.top_k = 20, s.top_p = 0.9; break;
      default: break;
    }
    if (i % 7 == 3) s.beam_width = 3, s.top_k = 0, s.top_p = 0, s.temperature = 1, s.repetition_penalty = 1;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<GenerationOutput> run(Model& m, const std::vector<DecodeRequest>& reqs, int64_t batch, bool continuous) {
  SchedulerOptions o;
  o.batch_size = batch;
  o.continuous = continuous;
  Scheduler s(m.eng, m.comm, o);
  auto out = s.run_all(reqs);
  EXPECT_EQ(m.eng.kv_cache().referenced(), 0) << "a run gives every KV block back";
  return out;
}

class SchedulerModels : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerModels, EveryBatchingGivesTheTokensOfOneByOne) {
  Model m(GetParam());
  const auto reqs = mixed_requests(m.eng.vocab_size(), 40, 17);
  const auto alone = run(m, reqs, 1, true);
  // The requests are not trivial: lengths vary and some stop early.
  std::vector<size_t> lengths;
  for (const auto& o : alone) lengths.push_back(o.result.beams[0].output_ids.size());
  EXPECT_GT(std::set<size_t>(lengths.begin(), lengths.end()).size(), 5u);
  test::expect_same_results(alone, run(m, reqs, 6, true), "continuous 6");
  test::expect_same_results(alone, run(m, reqs, 6, false), "static 6");
  test::expect_same_results(alone, run(m, reqs, 64, true), "one batch");
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(alone[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(alone[i].input_length, static_cast<int64_t>(reqs[i].input_ids.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SchedulerModels, ::testing::Values("gpt2", "gptneox", "bloom", "santacoder"),
                         [](const auto& info) { return info.param; });

// Continuous batching really refills rows: fewer decode steps than static batching.
TEST(Scheduler, ContinuousBatchingTakesFewerSteps) {
  Model m("gpt2");
  std::vector<DecodeRequest> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back({{1, 2, 3}, i % 4 == 0 ? 20 : 2, SamplingConfig{}});
  SchedulerOptions o;
  o.batch_size = 4;
  Scheduler cont(m.eng, m.comm, o);
  cont.run_all(reqs);
  o.continuous = false;
  Scheduler stat(m.eng, m.comm, o);
  stat.run_all(reqs);
  // Static: 3 batches, each as long as its 20-token request (60 steps); continuous: the long
  // requests run side by side while the short ones pass through the other rows.
  EXPECT_EQ(stat.stats().steps, 60);
  EXPECT_LT(cont.stats().steps, 30);
  EXPECT_EQ(cont.stats().generated_tokens, stat.stats().generated_tokens);
}

TEST(Scheduler, OrderedResultsLeaveInInputOrder) {
  std::vector<int64_t> seen;
  OrderedResults ordered(5, [&](GenerationOutput&& o) { seen.push_back(o.index); });
  for (int64_t i : {7, 5, 9, 6, 8}) {
    GenerationOutput o;
    o.index = i;
    ordered.add(std::move(o));
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(ordered.pending(), 0u);
}

// A bad request in the stream stops the run with an error naming it; results before it are out.
TEST(Scheduler, ABadRequestIsAnErrorNamingIt) {
  Model m("gpt2");
  std::vector<Request> reqs(3);
  for (int i = 0; i < 3; ++i) {
    reqs[i].index = i;
    reqs[i].decode = {{1, 2}, 2, SamplingConfig{}};
  }
  reqs[2].decode.sampling.top_p = 3.0;
  VectorSource src(reqs);
  SchedulerOptions o;
  o.batch_size = 2;
  o.continuous = false;
  Scheduler s(m.eng, m.comm, o);
  int results = 0;
  try {
    s.run(&src, [&](GenerationOutput&&) { ++results; });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "request 3: top_p 3 outside [0, 1]");
  }
  EXPECT_EQ(results, 2);
}

TEST(Scheduler, StopsWhenAskedAfterTheResultsItHandedOut) {
  Model m("gpt2");
  std::vector<DecodeRequest> reqs(10, DecodeRequest{{4, 5}, 3, SamplingConfig{}});
  std::vector<Request> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(Request{i, reqs[i], {}, 0});
  VectorSource src(rs);
  SchedulerOptions o;
  o.batch_size = 2;
  Scheduler s(m.eng, m.comm, o);
  int results = 0;
  const auto status = s.run(&src, [&](GenerationOutput&&) { ++results; }, nullptr, [&] { return results >= 4; });
  EXPECT_EQ(status, Scheduler::Status::kStopped);
  EXPECT_GE(results, 4);
  EXPECT_LT(results, 10);
}

// Growing the cache (more rows, longer rows) keeps every row: decoding goes on exactly as if the
// larger cache had been there from the start.
TEST(EngineGrowth, GrowingKeepsEveryRowsHistory) {
  const auto e = test::load_expected(test::engine_fixtures() + "/gpt2");
  auto decode_run = [&](bool grow) {
    Model m("gpt2");
    std::vector<float> logits(2 * e.vocab), out;
    m.eng.reserve(grow ? 2 : 4, grow ? 16 : 64, grow ? 16 : 64);
    m.eng.prefill({e.prompts[1], e.prompts[2]}, {0, 1}, logits.data());
    for (int step = 0; step < 4; ++step) m.eng.decode({7, 9}, {0, 1}, logits.data());
    if (grow) m.eng.reserve(4, 64, 64);
    EXPECT_EQ(m.eng.row_length(0), static_cast<int64_t>(e.prompts[1].size()) + 4);
    for (int step = 0; step < 10; ++step) {
      m.eng.decode({11, 13}, {0, 1}, logits.data());
      out.insert(out.end(), logits.begin(), logits.end());
    }
    return out;
  };
  EXPECT_EQ(decode_run(true), decode_run(false));
}

// The cache is checked against the backend's memory before it is allocated.
class SmallBackend : public cpu::CpuBackend {
 public:
  SmallBackend() : cpu::CpuBackend(1) {}
  size_t available_memory() const override { return limit; }
  float* alloc(size_t n) override {
    allocated += n;
    return cpu::CpuBackend::alloc(n);
  }
  size_t limit = SIZE_MAX, allocated = 0;
};

TEST(EngineGrowth, RefusesACacheThatDoesNotFitBeforeAllocating) {
  SmallBackend be;
  dist::SingleRank comm;
  auto w = ModelWeights::load(test::engine_fixtures() + "/gpt2/1-gpu", 0, 1, be);
  Engine eng(w, be, comm);
  be.limit = 1 << 20;
  const size_t before = be.allocated;
  try {
    eng.reserve(1000, 4096, 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory before allocating: the KV cache for 1000 rows"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("0.00 GiB is available"), std::string::npos) << e.what();
  }
  EXPECT_EQ(be.allocated, before);
  be.limit = SIZE_MAX;
  EXPECT_NO_THROW(eng.reserve(2, 16, 16));
}

}  // namespace
}  // namespace ftx
