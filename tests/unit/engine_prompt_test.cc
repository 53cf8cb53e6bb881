// p-tuning in the engine (issue 13): the engine fixtures gpt2 (fp16 files) and gptnext (NeMo
// GPT-Next, fp32) with the tables of scripts/fixtures/make_prompt_fixtures.py's classic.nemo added
// the FT way (add_prompt_tables, as `ftx prompt-convert --model-dir`). A mixed batch (three tasks
// and a request with no task; virtual tokens first, and in the middle of a prompt) and each
// request alone: logits along the reference's greedy paths within 1e-4 of the float64 reference
// that substitutes the embeddings (tests/reference/gpt_reference.py `embeds`). Under
// `mpirun -np 2` (tests/e2e/prompt/prompt.cmake) the 2-gpu folders: equal to 1 rank within 1e-5.
// Prefix prompts (type 2): the fixture's prefix/<model> folders, the reference prepending each
// layer's K/V prefix, the same checks; and with an INT8 KV cache against its emulation.
#include <gtest/gtest.h>

#include "engine_prompt_util.h"

namespace ftx {
namespace {

using test::folder_with_tables;
using test::load;
using test::prompt_fixtures;
using test::run_paths;

// All requests in one batch, then each alone: logits along the reference's greedy paths within
// 1e-4 of the float64 reference both times.
template <typename Expected>
void expect_batch_and_alone_match_reference(const std::string& dir, const Expected& e, const QuantPolicy& quant = {}) {
  dist::SingleRank single;
  std::vector<size_t> all;
  for (size_t i = 0; i < e.ids.size(); ++i) all.push_back(i);
  const auto batch = run_paths(dir, e, all, single, nullptr, quant);
  for (size_t i = 0; i < all.size(); ++i) {
    const auto alone = run_paths(dir, e, {i}, single, nullptr, quant);
    ASSERT_EQ(batch[i].size(), e.greedy_logits[i].size());
    for (size_t s = 0; s < batch[i].size(); ++s) {
      EXPECT_TRUE(test::logits_close(batch[i][s].data(), e.greedy_logits[i][s].data(), e.vocab, 1e-4))
          << "request " << i << " step " << s << " (batch)";
      EXPECT_TRUE(test::logits_close(alone[0][s].data(), e.greedy_logits[i][s].data(), e.vocab, 1e-4))
          << "request " << i << " step " << s << " (alone)";
    }
  }
}

TEST(EnginePromptTuning, MixedBatchAndSingleRequestsMatchReference) {
  if (dist::launched_by_mpi()) GTEST_SKIP() << "the TP=2 test runs under mpirun";
  const std::string fx = prompt_fixtures(), eng = test::engine_fixtures();
  for (const auto& m : test::prompt_models()) {
    SCOPED_TRACE(m);
    const auto e = load(fx, m);
    const std::string dir = folder_with_tables(eng + "/" + m + "/1-gpu", fx);
    expect_batch_and_alone_match_reference(dir, e);
    std::filesystem::remove_all(dir);
  }
}

TEST(EnginePrefixPrompt, MixedBatchAndSingleRequestsMatchReference) {
  if (dist::launched_by_mpi()) GTEST_SKIP() << "the TP=2 test runs under mpirun";
  const std::string fx = prompt_fixtures();
  for (const auto& m : test::prompt_models()) {
    SCOPED_TRACE(m);
    const auto e = load(fx, m, /*prefix=*/true);
    const std::string dir = fx + "/prefix/" + m + "/1-gpu";
    expect_batch_and_alone_match_reference(dir, e);
  }
}

// With an INT8 KV cache the prefix K/V are stored in it like every other element (quantised with
// the layer's scale): against the emulation (int8_kv_reference.py) whose scales keep every element,
// the prefix's included, clear of rounding boundaries.
TEST(EnginePrefixPrompt, Int8KvCacheMatchesEmulation) {
  if (dist::launched_by_mpi()) GTEST_SKIP() << "the TP=2 test runs under mpirun";
  const std::string fx = prompt_fixtures();
  for (const auto& m : test::prompt_models()) {
    SCOPED_TRACE(m);
    const auto e = load(fx, m, /*prefix=*/true, "int8_kv_cache");
    QuantPolicy int8_kv;
    int8_kv.int8_kv_cache = true;
    expect_batch_and_alone_match_reference(fx + "/prefix/" + m + "/1-gpu", e, int8_kv);
    // The emulation is not the fp32 reference (the check would then prove nothing): step 0 of
    // every request differs by more than the tolerance.
    const auto fp = load(fx, m, /*prefix=*/true);
    for (size_t i = 0; i < e.ids.size(); ++i)
      EXPECT_FALSE(test::logits_close(e.greedy_logits[i][0].data(), fp.greedy_logits[i][0].data(), e.vocab, 1e-3))
          << "request " << i << ": the INT8 KV cache moves the logits less than 1e-3";
  }
}

// TP 2 equals TP 1 within 1e-5 and the reference within 1e-4; with an INT8 KV cache (each rank
// stores its heads' prefix K/V) the same against the emulation.
TEST(EnginePrefixPrompt, TwoRanksMatchOneAndReference) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  if (comm->rank() == 0) prompt_fixtures();
  comm->barrier();
  const std::string fx = prompt_fixtures();
  for (const auto& m : test::prompt_models())
    for (const std::string variant : {"", "int8_kv_cache"}) {
      SCOPED_TRACE(m + " " + variant);
      const auto e = load(fx, m, /*prefix=*/true, variant);
      std::vector<size_t> all;
      for (size_t i = 0; i < e.ids.size(); ++i) all.push_back(i);
      cpu::CpuBackend be(0);
      QuantPolicy quant;
      quant.int8_kv_cache = !variant.empty();
      const auto tp2 = run_paths(fx + "/prefix/" + m + "/2-gpu", e, all, *comm, &be, quant);
      if (comm->rank() != 0) continue;
      dist::SingleRank single;
      const auto tp1 = run_paths(fx + "/prefix/" + m + "/1-gpu", e, all, single, &be, quant);
      for (size_t i = 0; i < all.size(); ++i)
        for (size_t s = 0; s < tp2[i].size(); ++s) {
          EXPECT_TRUE(test::logits_close(tp2[i][s].data(), tp1[i][s].data(), e.vocab, 1e-5))
              << "request " << i << " step " << s;
          EXPECT_TRUE(test::logits_close(tp2[i][s].data(), e.greedy_logits[i][s].data(), e.vocab, 1e-4))
              << "request " << i << " step " << s;
        }
    }
}

TEST(EnginePromptTuning, TwoRanksMatchOneAndReference) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  std::string fx, eng;
  if (comm->rank() == 0) {  // fixtures made once, by rank 0
    fx = prompt_fixtures();
    eng = test::engine_fixtures();
  }
  comm->barrier();
  fx = prompt_fixtures();
  eng = test::engine_fixtures();
  for (const auto& m : test::prompt_models()) {
    SCOPED_TRACE(m);
    const auto e = load(fx, m);
    std::vector<size_t> all;
    for (size_t i = 0; i < e.ids.size(); ++i) all.push_back(i);
    const std::string dir2 = folder_with_tables(eng + "/" + m + "/2-gpu", fx);
    const auto tp2 = run_paths(dir2, e, all, *comm);
    std::filesystem::remove_all(dir2);
    if (comm->rank() != 0) continue;
    dist::SingleRank single;
    const std::string dir1 = folder_with_tables(eng + "/" + m + "/1-gpu", fx);
    const auto tp1 = run_paths(dir1, e, all, single);
    std::filesystem::remove_all(dir1);
    for (size_t i = 0; i < all.size(); ++i)
      for (size_t s = 0; s < tp2[i].size(); ++s) {
        EXPECT_TRUE(test::logits_close(tp2[i][s].data(), tp1[i][s].data(), e.vocab, 1e-5)) << "request " << i << " step " << s;
        EXPECT_TRUE(test::logits_close(tp2[i][s].data(), e.greedy_logits[i][s].data(), e.vocab, 1e-4))
            << "request " << i << " step " << s;
      }
  }
}

}  // namespace
}  // namespace ftx
