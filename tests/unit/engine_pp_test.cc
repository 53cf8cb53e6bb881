// Pipeline parallelism at the engine level: run under `mpirun -np 2` and `-np 4` (tests/e2e/parallel/pp.cmake)
// on the 4- and 5-layer fixtures of scripts/fixtures/make_pp_models.py. For every grid the world
// allows (2 ranks: TP 1 x PP 2 and TP 2 x PP 1; 4 ranks: 1 x 4 and 2 x 2), with the default
// micro-batches and with one row per micro-batch, the logits that reach rank 0 after a padded
// prefill and greedy decode steps equal (1e-5) those of one rank holding the whole model, which
// every rank computes for itself to know the greedy path. Without an MPI launcher the test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "engine_test_util.h"
#include "lib/dist/parallel.h"

namespace ftx {
namespace {

struct Path {
  std::vector<std::vector<float>> logits;  // per call: [rows, V] (rank 0)
  std::vector<std::vector<int32_t>> feeds;  // tokens fed after each call but the last
};

std::vector<std::vector<int32_t>> prompts_of(const std::string& dir) {
  std::ifstream in(dir + "/start_ids.csv");
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::vector<int32_t> ids;
    for (size_t at = 0; at <= line.size();) {
      const size_t comma = std::min(line.find(',', at), line.size());
      ids.push_back(std::atoi(line.substr(at, comma - at).c_str()));
      at = comma + 1;
    }
    out.push_back(ids);
  }
  return out;
}

// Prefill then `steps` decode steps of every row. feeds empty: greedy from this engine's logits
// (valid on the rank that receives them, with a SingleRank engine everywhere); else those tokens.
Path run(Engine& eng, const std::vector<std::vector<int32_t>>& prompts, int steps, const Path* follow) {
  const int64_t B = static_cast<int64_t>(prompts.size()), V = eng.vocab_size();
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  eng.reserve(B, longest + steps + 1, B * longest);
  std::vector<int32_t> rows;
  for (int64_t b = 0; b < B; ++b) rows.push_back(static_cast<int32_t>(b));
  Path p;
  std::vector<float> logits(static_cast<size_t>(B * V));
  eng.prefill(prompts, rows, logits.data());
  for (int s = 0;; ++s) {
    p.logits.push_back(logits);
    if (s == steps) break;
    std::vector<int32_t> feed(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b)
      feed[b] = follow ? follow->feeds[s][b]
                       : static_cast<int32_t>(std::max_element(logits.begin() + b * V, logits.begin() + (b + 1) * V) -
                                              (logits.begin() + b * V));
    p.feeds.push_back(feed);
    eng.decode(feed, rows, logits.data());
  }
  return p;
}

TEST(EnginePipelineParallel, EveryGridMatchesOneRank) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2 or -np 4";
  auto world = dist::make_communicator();
  const int n = world->size();
  ASSERT_TRUE(n == 2 || n == 4) << n << " ranks";
  const char* fix = std::getenv("FTX_FIXTURES");
  ASSERT_TRUE(fix && *fix) << "FTX_FIXTURES is not set (the pp_models fixture makes $FTX_FIXTURES/pp)";
  const std::string root = std::string(fix) + "/pp";
  const std::vector<std::pair<int, int>> grids = n == 2 ? std::vector<std::pair<int, int>>{{1, 2}, {2, 1}}
                                                        : std::vector<std::pair<int, int>>{{1, 4}, {2, 2}};
  for (const std::string name : {"gpt2", "gpt2_5", "gptneox", "bloom"}) {
    SCOPED_TRACE(name);
    const auto prompts = prompts_of(root + "/" + name);
    cpu::CpuBackend be(1);
    ModelWeights whole = ModelWeights::load(root + "/" + name + "/1-gpu", 0, 1, be);
    dist::SingleRank single;
    Engine one(whole, be, single);
    const Path want = run(one, prompts, 5, nullptr);
    for (const auto& [tp, pp] : grids)
      for (const int64_t micro : {int64_t{0}, int64_t{1}}) {
        SCOPED_TRACE("TP " + std::to_string(tp) + " x PP " + std::to_string(pp) + ", micro-batch " +
                     std::to_string(micro));
        const auto layout = dist::ParallelLayout::resolve(tp, pp, n, world->rank(), 5);
        dist::ParallelGroups groups(*world, layout);
        ModelWeights w = ModelWeights::load(root + "/" + name + "/" + std::to_string(tp) + "-gpu", layout, be, {});
        EngineOptions o;
        o.micro_batch = micro;
        Engine eng(w, be, groups, o);
        const Path got = run(eng, prompts, 5, &want);
        if (world->rank() != 0) continue;
        const int64_t V = eng.vocab_size();
        for (size_t s = 0; s < want.logits.size(); ++s)
          for (size_t b = 0; b < prompts.size(); ++b)
            EXPECT_TRUE(test::logits_close(got.logits[s].data() + b * V, want.logits[s].data() + b * V, V, 1e-5))
                << "call " << s << " row " << b;
      }
  }
}

}  // namespace
}  // namespace ftx
