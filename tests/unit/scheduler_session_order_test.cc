// Session rounds run in input order whatever the prefix cache shares (lib/engine/scheduler.h).
// A newcomer whose first uncached block another newcomer of the same admission computes waits a
// step; a session's later rounds must wait behind such a round, not start in its place. Sessions
// whose first rounds share 1 to 3 blocks of 4, 16 and 64 tokens, grouped or interleaved in the
// input, with continuous and static batching, with room for all and under a KV-cache budget that
// evicts idle sessions: every round carries its place in its session (round, context length) and
// the tokens of its session run alone, one request at a time, without a prefix cache.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "lib/engine/scheduler.h"

namespace ftx {
namespace {

struct Rig {
  Rig(const std::string& model, const EngineOptions& o)
      : dir(test::engine_fixtures() + "/" + model + "/1-gpu"), be(1), w(ModelWeights::load(dir, 0, 1, be)),
        eng(w, be, comm, o) {}
  std::string dir;
  cpu::CpuBackend be;
  dist::SingleRank comm;
  ModelWeights w;
  Engine eng;
};

EngineOptions paged(int64_t block_size, bool prefix_cache, int64_t budget_bytes = 0) {
  EngineOptions o;
  o.block_size = block_size;
  o.prefix_cache = prefix_cache;
  if (budget_bytes > 0) {
    o.kv_cache.kind = kv::KvCacheBudget::Kind::kBytes;
    o.kv_cache.value = static_cast<double>(budget_bytes);
  }
  return o;
}

constexpr int kSessions = 3, kRounds = 3, kNewTokens = 4;

// Session s's rounds: the first is `shared` common tokens and two of its own, later ones 2-3 tokens.
std::vector<std::vector<Request>> session_rounds(int64_t shared) {
  std::vector<std::vector<Request>> out(kSessions);
  for (int s = 0; s < kSessions; ++s)
    for (int k = 0; k < kRounds; ++k) {
      Request r;
      r.session = std::string(1, static_cast<char>('a' + s));
      std::vector<int32_t>& ids = r.decode.input_ids;
      if (k == 0) {
        for (int64_t t = 0; t < shared; ++t) ids.push_back(static_cast<int32_t>(3 + (t * 7) % 250));
        ids.push_back(260 + s);
        ids.push_back(270 + s);
      } else {
        for (int t = 0; t < 2 + (k + s) % 2; ++t) ids.push_back(static_cast<int32_t>(11 + 13 * k + 5 * s + t));
      }
      r.decode.max_new_tokens = kNewTokens;
      r.decode.sampling.return_log_probs = true;
      out[s].push_back(std::move(r));
    }
  return out;
}

std::vector<GenerationOutput> run(Engine& eng, std::vector<Request> reqs, int64_t batch, bool continuous,
                                  GenerateStats* stats = nullptr) {
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].index = static_cast<int64_t>(i);
  dist::SingleRank comm;
  SchedulerOptions o;
  o.batch_size = batch;
  o.continuous = continuous;
  Scheduler sched(eng, comm, o);
  VectorSource src(reqs);
  std::vector<GenerationOutput> out(reqs.size());
  sched.run(&src, [&](GenerationOutput&& g) { out[static_cast<size_t>(g.index)] = std::move(g); });
  if (stats) *stats = sched.stats();
  return out;
}

TEST(SessionOrder, S1_RoundsRunInOrderWhateverBlocksTheFirstRoundsShare) {
  const std::string model = "gptneox";  // rotary: no position table bounds the 3 × 64 shared tokens
  for (const int64_t bs : {4, 16, 64}) {
    for (const int64_t blocks : {1, 2, 3}) {
      const auto sessions = session_rounds(blocks * bs);
      // Each session alone: its rounds one after the other, no sharing, no budget.
      std::vector<std::vector<GenerationOutput>> alone;
      int64_t longest = 0;  // tokens of the longest session, to size the budget below
      {
        Rig ref(model, paged(bs, false));
        for (const auto& rounds : sessions) {
          alone.push_back(run(ref.eng, rounds, 1, true));
          int64_t n = 0;
          for (const auto& r : rounds) n += static_cast<int64_t>(r.decode.input_ids.size()) + kNewTokens;
          longest = std::max(longest, n);
        }
      }
      std::vector<Request> grouped, interleaved;
      for (int s = 0; s < kSessions; ++s)
        for (int k = 0; k < kRounds; ++k) grouped.push_back(sessions[s][k]);
      for (int k = 0; k < kRounds; ++k)
        for (int s = 0; s < kSessions; ++s) interleaved.push_back(sessions[s][k]);
      const int64_t block_bytes = Rig(model, paged(bs, true)).eng.kv_block_bytes();
      // The budget: room for the longest session and one block more, so idle sessions give way.
      const int64_t tight = ((longest + bs - 1) / bs + 1) * block_bytes;
      for (const int64_t budget : {int64_t{0}, tight})
        for (const bool continuous : {true, false})
          for (const auto* order : {&grouped, &interleaved}) {
            const std::string what = "block size " + std::to_string(bs) + ", " + std::to_string(blocks) +
                                     " shared blocks, " + (continuous ? "continuous" : "static") +
                                     (budget ? ", budget" : "") + (order == &grouped ? ", grouped" : ", interleaved");
            SCOPED_TRACE(what);
            Rig rig(model, paged(bs, true, budget));
            ASSERT_EQ(rig.eng.budgeted(), budget > 0);
            GenerateStats st;
            const auto got = run(rig.eng, *order, 4, continuous, &st);
            EXPECT_EQ(rig.eng.kv_cache().referenced(), 0) << "a run gives every block back";
            if (continuous && !budget) EXPECT_GT(rig.eng.tokens_reused(), 0) << "the first rounds shared blocks";
            std::map<std::string, int64_t> round, context;
            for (size_t i = 0; i < got.size(); ++i) {
              const Request& r = (*order)[i];
              const int s = r.session[0] - 'a';
              const int64_t k = round[r.session]++;
              const GenerationOutput& want = alone[static_cast<size_t>(s)][static_cast<size_t>(k)];
              EXPECT_EQ(got[i].session, r.session) << "result " << i;
              EXPECT_EQ(got[i].round, k + 1) << "result " << i << " (session " << r.session << ")";
              EXPECT_EQ(got[i].context_length, context[r.session]) << "result " << i;
              ASSERT_FALSE(got[i].result.beams.empty()) << "result " << i;
              EXPECT_EQ(got[i].result.beams[0].output_ids, want.result.beams[0].output_ids)
                  << "result " << i << " (session " << r.session << " round " << k + 1 << ")";
              context[r.session] += static_cast<int64_t>(r.decode.input_ids.size() +
                                                         got[i].result.beams[0].output_ids.size());
            }
            if (budget && continuous && order == &interleaved) EXPECT_GT(st.evictions, 0) << "idle sessions gave way";
          }
    }
  }
}

}  // namespace
}  // namespace ftx
