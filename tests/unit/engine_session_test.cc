// Sessions at the engine level: appending a round's tokens after a row's cached context gives the
// logits of one fresh prefill of the whole context (1e-5), and a circular cache (memory_len) gives
// the float64 reference with attention over the last memory_len positions (1e-4), at and after
// the wrap-around. Runs as is (TP 1) and under `mpirun -np 2` (tests/e2e/parallel/engine_mpi.cmake: the 2-gpu
// folders, TP 2; rank 0 checks).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine_test_util.h"

namespace ftx {
namespace {

struct Rig {
  explicit Rig(const std::string& model, int64_t memory_len = 0)
      : comm(dist::make_communicator()), be(0),
        w(ModelWeights::load(test::engine_fixtures() + "/" + model + "/" + std::to_string(comm->size()) + "-gpu",
                             comm->rank(), comm->size(), be)),
        eng(w, be, *comm, EngineOptions{memory_len}) {}
  std::unique_ptr<dist::Communicator> comm;
  cpu::CpuBackend be;
  ModelWeights w;
  Engine eng;
};

int32_t argmax(const std::vector<float>& l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

class EngineSession : public ::testing::TestWithParam<std::string> {};

// Round 1: prompt A, three greedy tokens (the last one not yet run, as the scheduler leaves it);
// round 2 appends [that token] + B. A fresh row prefilled with the whole context must agree, and so
// must four greedy steps after it.
TEST_P(EngineSession, AppendEqualsAFreshPrefillOfTheWholeContext) {
  Rig r(GetParam());
  const auto e = test::load_expected(test::engine_fixtures() + "/" + GetParam());
  const int64_t V = e.vocab;
  const bool leader = r.comm->rank() == 0;
  r.eng.reserve(2, 64, 64);
  std::vector<float> lg(2 * V), a(V), b(V);
  std::vector<int32_t> context = e.prompts[2];
  r.eng.prefill({context}, {0}, lg.data());
  std::vector<int32_t> gen;
  for (int i = 0; i < 3; ++i) {
    int32_t t = leader ? argmax(std::vector<float>(lg.begin(), lg.begin() + V)) : 0;
    r.comm->broadcast(&t, sizeof t, 0);
    gen.push_back(t);
    if (i < 2) r.eng.decode({t}, {0}, lg.data());
  }
  context.insert(context.end(), gen.begin(), gen.end());
  std::vector<int32_t> round2 = {gen.back()};
  round2.insert(round2.end(), e.prompts[1].begin(), e.prompts[1].end());
  context.insert(context.end(), e.prompts[1].begin(), e.prompts[1].end());
  EXPECT_EQ(r.eng.row_length(0), static_cast<int64_t>(e.prompts[2].size()) + 2);
  r.eng.append({round2}, {0}, a.data());
  r.eng.prefill({context}, {1}, b.data());
  EXPECT_EQ(r.eng.row_length(0), r.eng.row_length(1));
  if (leader) EXPECT_TRUE(test::logits_close(a.data(), b.data(), V, 1e-5)) << "after the append";
  for (int step = 0; step < 4; ++step) {
    int32_t t = leader ? argmax(b) : 0;
    r.comm->broadcast(&t, sizeof t, 0);
    if (leader) EXPECT_EQ(argmax(a), t) << "step " << step;
    r.eng.decode({t, t}, {0, 1}, lg.data());
    std::copy_n(lg.begin(), V, a.begin());
    std::copy_n(lg.begin() + V, V, b.begin());
    if (leader) EXPECT_TRUE(test::logits_close(a.data(), b.data(), V, 1e-5)) << "step " << step;
  }
}

// memory_len: greedy steps that wrap the circular cache twice; every step's logits against the
// float64 reference whose attention sees the last memory_len positions.
TEST_P(EngineSession, CircularCacheMatchesWindowedReference) {
  const auto dir = test::engine_fixtures() + "/" + GetParam();
  std::ifstream in(dir + "/expected.json");
  const auto j = nlohmann::json::parse(in)["window"];
  const int64_t M = j["memory_len"].get<int64_t>();
  Rig r(GetParam(), M);
  const auto prompt = j["prompt"].get<std::vector<int32_t>>();
  const auto greedy = j["greedy"].get<std::vector<int32_t>>();
  const auto want = j["logits"].get<std::vector<std::vector<double>>>();
  const int64_t V = r.eng.vocab_size();
  const bool leader = r.comm->rank() == 0;
  r.eng.reserve(1, 1000, 64);
  EXPECT_EQ(r.eng.max_seq(), M);  // the cache is the memory, whatever was asked
  std::vector<float> lg(V);
  r.eng.prefill({prompt}, {0}, lg.data());
  for (size_t s = 0; s < want.size(); ++s) {
    if (leader) {
      EXPECT_TRUE(test::logits_close(lg.data(), want[s].data(), V, 1e-4))
          << "step " << s << " (position " << prompt.size() + s - 1 << ", memory " << M << ")";
      EXPECT_EQ(argmax(lg), greedy[s]) << "step " << s;
    }
    if (s + 1 < want.size()) r.eng.decode({greedy[s]}, {0}, lg.data());
  }
  EXPECT_GT(static_cast<int64_t>(prompt.size() + want.size()), 2 * M);  // wrapped twice
  // An append that wraps (more tokens than the memory has left) is fed one token at a time and
  // gives the same logits as decoding them one by one.
  Rig s(GetParam(), M);
  s.eng.reserve(2, 1000, 64);
  std::vector<float> two(2 * V);
  s.eng.prefill({prompt, prompt}, {0, 1}, two.data());
  const std::vector<int32_t> more(greedy.begin(), greedy.begin() + 6);
  std::vector<float> appended(V);
  s.eng.append({more}, {0}, appended.data());
  for (int32_t t : more) s.eng.decode({t}, {1}, two.data());
  if (leader) EXPECT_TRUE(test::logits_close(appended.data(), two.data(), V, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Models, EngineSession, ::testing::Values("gpt2", "gptneox", "bloom"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ftx
