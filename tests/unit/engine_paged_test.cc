// The paged KV cache in the engine and the scheduler (lib/engine/kv_cache/): whatever the block
// size, the sharing and the preemptions, the same tokens and logits (within 1e-5) as the contiguous
// cache, i.e. one block per row of the row's whole length (the layout the cache had before pages).
//  * block sizes 1, 16, 64 and one larger than any prompt, on four architectures (learned
//    positions, rotary, ALiBi, MQA): logits along the reference's greedy paths, and greedy, seeded
//    sampling and beam search through the scheduler;
//  * prefix sharing: prompts equal, one token apart, equal up to a block boundary, p-tuning tasks
//    whose virtual tokens share FT ids, prefix prompts of different tasks: hits where the tokens
//    (and task) since position 0 agree, misses elsewhere, and the logits of a fresh prefill;
//  * preemption under a tiny budget: the same results, requests preempted and resumed;
//  * beams fork by sharing blocks: only blocks are ever copied, at most K-1 per request and step.
// Every test ends with no block held.
#include <gtest/gtest.h>

#include <random>

#include "engine_prompt_util.h"
#include "engine_test_util.h"
#include "generation_compare.h"
#include "formats/error.h"
#include "lib/engine/kv_cache_scales.h"
#include "lib/engine/scheduler.h"

namespace ftx {
namespace {

constexpr int64_t kContiguous = 256;  // a block longer than any row here: one block per row

EngineOptions paged(int64_t block_size, bool prefix_cache = true) {
  EngineOptions o;
  o.block_size = block_size;
  o.prefix_cache = prefix_cache;
  return o;
}

void expect_no_block_held(Engine& eng) {
  std::vector<int32_t> rows;
  for (int64_t r = 0; r < eng.rows(); ++r) rows.push_back(static_cast<int32_t>(r));
  eng.release_rows(rows);
  EXPECT_EQ(eng.kv_cache().referenced(), 0);
  EXPECT_EQ(eng.kv_cache().available(), eng.kv_cache().capacity());
}

// Counts what gather_cache_rows copies: the engine's copies on write.
class CountingBackend : public cpu::CpuBackend {
 public:
  CountingBackend() : cpu::CpuBackend(0) {}
  void gather_cache_rows(const ops::KvCache& cache, const int32_t* dst, const int32_t* src, int64_t n,
                         int64_t row_elems) override {
    ++calls;
    units += n;
    largest = std::max(largest, row_elems);
    cpu::CpuBackend::gather_cache_rows(cache, dst, src, n, row_elems);
  }
  int64_t calls = 0, units = 0, largest = 0;
};

struct Rig {
  Rig(const std::string& model, EngineOptions o)
      : dir(test::engine_fixtures() + "/" + model + "/1-gpu"), w(ModelWeights::load(dir, 0, 1, be)), eng(w, be, comm, o) {}
  std::string dir;
  CountingBackend be;
  dist::SingleRank comm;
  ModelWeights w;
  Engine eng;
};

using Paths = std::vector<std::vector<std::vector<float>>>;  // [prompt][step][V]

// Logits along the reference's greedy paths, all prompts in one batch.
Paths greedy_paths(const std::string& model, EngineOptions o) {
  CountingBackend be;
  dist::SingleRank comm;
  const std::string dir = test::engine_fixtures() + "/" + model;
  return test::run_greedy_paths_on(be, dir + "/1-gpu", test::load_expected(dir), comm, o).steps;
}

class PagedModels : public ::testing::TestWithParam<std::string> {};

TEST_P(PagedModels, GreedyLogitsEqualTheContiguousCacheForEveryBlockSize) {
  const auto want = greedy_paths(GetParam(), paged(kContiguous));
  const int64_t V = test::load_expected(test::engine_fixtures() + "/" + GetParam()).vocab;
  for (const int64_t bs : {1, 16, 64, 128}) {
    const auto got = greedy_paths(GetParam(), paged(bs));
    ASSERT_EQ(got.size(), want.size());
    for (size_t p = 0; p < want.size(); ++p)
      for (size_t s = 0; s < want[p].size(); ++s)
        EXPECT_TRUE(test::logits_close(got[p][s].data(), want[p][s].data(), V, 1e-5))
            << "block size " << bs << ", prompt " << p << ", step " << s;
  }
}

// Greedy, seeded top-k / top-p / penalties, beam search (width 3); prompts of 1 to 50 tokens.
std::vector<DecodeRequest> mixed_requests(int64_t vocab, int n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> token(1, static_cast<int32_t>(vocab) - 2), short_len(1, 12), long_len(30, 50),
      new_tokens(2, 13);
  std::vector<DecodeRequest> out;
  for (int i = 0; i < n; ++i) {
    DecodeRequest r;
    r.input_ids.resize(static_cast<size_t>(i % 4 == 0 ? long_len(rng) : short_len(rng)));
    for (int32_t& t : r.input_ids) t = token(rng);
    r.max_new_tokens = new_tokens(rng);
    SamplingConfig& s = r.sampling;
    s.seed = static_cast<uint64_t>(i) + 1;
    s.return_log_probs = true;
    switch (i % 5) {
      case 0: s.temperature = 0; break;
      case 1: s.top_k = 4; break;
      case 2: s.top_p = 0.8; break;
      case 3: s.repetition_penalty = 1.4, s.top_k = 8; break;
      default: s.temperature = 0.6, s.top_k = 20, s.top_p = 0.9; break;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<DecodeRequest> beam_requests(int64_t vocab, int n, int64_t width, uint64_t seed) {
  auto reqs = mixed_requests(vocab, n, seed);
  for (auto& r : reqs) {
    r.sampling = SamplingConfig();
    r.sampling.beam_width = width;
    r.sampling.return_log_probs = true;
  }
  return reqs;
}

std::vector<GenerationOutput> schedule(Engine& eng, const std::vector<DecodeRequest>& reqs, int64_t batch,
                                       GenerateStats* stats = nullptr) {
  dist::SingleRank comm;
  SchedulerOptions o;
  o.batch_size = batch;
  Scheduler s(eng, comm, o);
  auto out = s.run_all(reqs);
  if (stats) *stats = s.stats();
  EXPECT_EQ(eng.kv_cache().referenced(), 0) << "a run ends with every block given back";
  return out;
}

TEST_P(PagedModels, DecodingEqualsTheContiguousCacheForEveryBlockSize) {
  Rig ref(GetParam(), paged(kContiguous));
  const auto sampled = mixed_requests(ref.eng.vocab_size(), 24, 5);
  const auto beams = beam_requests(ref.eng.vocab_size(), 8, 3, 6);
  const auto want_sampled = schedule(ref.eng, sampled, 6), want_beams = schedule(ref.eng, beams, 4);
  for (const int64_t bs : {1, 16, 64, 128}) {
    Rig r(GetParam(), paged(bs));
    test::expect_same_results(schedule(r.eng, sampled, 6), want_sampled, "block size " + std::to_string(bs));
    test::expect_same_results(schedule(r.eng, beams, 4), want_beams, "beams, block size " + std::to_string(bs));
  }
}

// A tiny budget: requests are admitted as their blocks fit, and the newest is preempted when a step
// would not fit, then prefilled again from its tokens so far: the same results as with room for all.
TEST_P(PagedModels, PreemptionUnderATinyBudgetGivesTheSameResults) {
  Rig ref(GetParam(), paged(kContiguous));
  const auto sampled = mixed_requests(ref.eng.vocab_size(), 24, 7);
  const auto beams = beam_requests(ref.eng.vocab_size(), 8, 3, 8);
  const int64_t bs = 4;
  for (const auto* reqs : {&sampled, &beams}) {
    const int64_t batch = reqs == &sampled ? 8 : 4;
    const auto want = schedule(ref.eng, *reqs, batch);
    // The smallest budget every request fits alone: room for a few of them at a time.
    int64_t blocks = 0;
    for (const auto& r : *reqs)
      blocks = std::max<int64_t>(blocks, r.sampling.beam_width *
                                             ((static_cast<int64_t>(r.input_ids.size()) + r.max_new_tokens + bs - 1) / bs));
    EngineOptions o = paged(bs);
    Rig probe(GetParam(), o);
    o.kv_cache.kind = kv::KvCacheBudget::Kind::kBytes;
    o.kv_cache.value = static_cast<double>(blocks * probe.eng.kv_block_bytes());
    Rig r(GetParam(), o);
    ASSERT_TRUE(r.eng.budgeted());
    EXPECT_EQ(r.eng.kv_cache().capacity(), blocks);
    GenerateStats st;
    test::expect_same_results(schedule(r.eng, *reqs, batch, &st), want, reqs == &sampled ? "tiny budget" : "beams, tiny budget");
    EXPECT_GT(st.preemptions, 0);
    EXPECT_GT(r.eng.kv_cache().stats().evictions, 0) << "cached blocks were reused";
    // One block less and the longest request could never finish: an error naming it, not a hang.
    o.kv_cache.value = static_cast<double>((blocks - 1) * probe.eng.kv_block_bytes());
    Rig small(GetParam(), o);
    try {
      schedule(small.eng, *reqs, batch);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("of the budget (raise --kv-cache-memory)"), std::string::npos) << e.what();
    }
  }
}

// Beams fork by sharing their parents' blocks: what is copied is a block (the last, partial one a
// beam writes into while another holds it), never a row, and at most K-1 per request and step.
TEST_P(PagedModels, BeamsCopyBlocksNotRows) {
  for (const int64_t width : {4, 8}) {
    SCOPED_TRACE("beam width " + std::to_string(width));
    Rig r(GetParam(), paged(16));
    const auto reqs = beam_requests(r.eng.vocab_size(), 4, width, 9);
    GenerateStats st;
    schedule(r.eng, reqs, 4, &st);
    const ModelConfig& c = r.w.config();
    const int64_t block_elems = r.eng.kv_cache().block_size() * c.kv_heads_per_rank(1) * c.size_per_head;
    EXPECT_EQ(r.be.largest, block_elems) << "a copy is one block of K or V";
    const int64_t copies = r.eng.kv_cache().stats().block_copies;
    EXPECT_GT(copies, 0);
    EXPECT_LE(copies, st.steps * 4 * (width - 1));
    // Each copy is one gather unit per layer for K and for V.
    EXPECT_EQ(r.be.units, copies * 2 * r.w.config().num_layer);
  }
}

// The INT8 KV cache (each layer's calibrated scale) is paged like any other: block sizes 1 and 16
// against one block per row.
class PagedInt8Models : public ::testing::TestWithParam<std::string> {};

TEST_P(PagedInt8Models, Int8KvCacheEqualsTheContiguousCache) {
  const std::string dir = test::engine_fixtures() + "/" + GetParam();
  ASSERT_TRUE(std::ifstream(dir + "/1-gpu/" + kv_cache_scale_file(0))) << "no INT8 KV-cache scales in " << dir;
  const auto e = test::load_expected(dir);
  auto run = [&](int64_t bs) {
    CountingBackend be;
    QuantPolicy int8_kv;
    int8_kv.int8_kv_cache = true;
    dist::SingleRank comm;
    return test::run_greedy_paths_on(be, dir + "/1-gpu", e, comm, paged(bs), int8_kv).steps;
  };
  const auto want = run(kContiguous);
  for (const int64_t bs : {1, 16}) {
    const auto got = run(bs);
    for (size_t p = 0; p < want.size(); ++p)
      for (size_t s = 0; s < want[p].size(); ++s)
        EXPECT_TRUE(test::logits_close(got[p][s].data(), want[p][s].data(), e.vocab, 1e-5))
            << "block size " << bs << ", prompt " << p << ", step " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PagedModels, ::testing::Values("gpt2", "gptneox", "bloom", "santacoder"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Models, PagedInt8Models, ::testing::ValuesIn(test::engine_int8_model_names()),
                         [](const auto& info) { return info.param; });

int32_t argmax(const float* l, int64_t n) { return static_cast<int32_t>(std::max_element(l, l + n) - l); }

// Prefills `prompt` into row `row` of `eng` and greedy-decodes `steps` tokens: the logits of each.
std::vector<std::vector<float>> prefill_and_decode(Engine& eng, const std::vector<int32_t>& prompt, int32_t row,
                                                   int steps) {
  const int64_t V = eng.vocab_size();
  std::vector<std::vector<float>> out(1, std::vector<float>(static_cast<size_t>(V)));
  eng.prefill({prompt}, {row}, out[0].data());
  for (int s = 0; s < steps; ++s) {
    std::vector<float> l(static_cast<size_t>(V));
    eng.decode({argmax(out.back().data(), V)}, {row}, l.data());
    out.push_back(std::move(l));
  }
  return out;
}

class PrefixSharing : public ::testing::TestWithParam<std::string> {};

// Block size 4. The first prompt fills the cache; each later prompt takes the blocks whose tokens
// since position 0 equal its own, runs only the rest, and gets the logits of a prefill from scratch.
TEST_P(PrefixSharing, HitsWhereTheTokensSincePositionZeroAgree) {
  const int64_t bs = 4;
  Rig shared(GetParam(), paged(bs)), fresh(GetParam(), paged(bs, /*prefix_cache=*/false));
  for (Rig* r : {&shared, &fresh}) r->eng.reserve(2, 64, 64);
  std::vector<int32_t> base;
  for (int i = 0; i < 18; ++i) base.push_back(static_cast<int32_t>(3 + 7 * i % 290));
  prefill_and_decode(shared.eng, base, 0, 0);
  struct Case {
    std::string what;
    std::vector<int32_t> prompt;
    int64_t hits;  // blocks
  };
  auto apart = base;
  apart[9] = 250;  // in the third block
  auto boundary = std::vector<int32_t>(base.begin(), base.begin() + 12);
  for (int32_t t : {201, 202, 203, 204, 205}) boundary.push_back(t);
  const std::vector<Case> cases = {
      {"equal", base, 4},  // 18 tokens: four full blocks; the last two tokens run
      {"one token apart", apart, 2},
      {"equal up to a block boundary", boundary, 3},
      {"a prefix of it ending on a boundary", std::vector<int32_t>(base.begin(), base.begin() + 16), 3},
      {"different from the first token", std::vector<int32_t>(base.rbegin(), base.rend()), 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const int64_t blocks0 = shared.eng.kv_cache().stats().prefix_blocks, run0 = shared.eng.tokens_computed();
    const auto got = prefill_and_decode(shared.eng, c.prompt, 1, 6);
    EXPECT_EQ(shared.eng.kv_cache().stats().prefix_blocks - blocks0, c.hits);
    // Tokens run: the prompt beyond the shared blocks (decode steps are not prefill tokens).
    EXPECT_EQ(shared.eng.tokens_computed() - run0, static_cast<int64_t>(c.prompt.size()) - c.hits * bs);
    const auto want = prefill_and_decode(fresh.eng, c.prompt, 1, 6);
    for (size_t s = 0; s < want.size(); ++s)
      EXPECT_TRUE(test::logits_close(got[s].data(), want[s].data(), shared.eng.vocab_size(), 1e-5)) << "step " << s;
  }
  // A prefill that asks for context embeddings sums them over the tokens it runs: it runs them all.
  const int64_t run0 = shared.eng.tokens_computed();
  std::vector<float> l(static_cast<size_t>(shared.eng.vocab_size())), ctx;
  shared.eng.prefill({base}, {1}, l.data(), &ctx);
  EXPECT_EQ(shared.eng.tokens_computed() - run0, static_cast<int64_t>(base.size()));
  expect_no_block_held(shared.eng);
  expect_no_block_held(fresh.eng);
}

INSTANTIATE_TEST_SUITE_P(Models, PrefixSharing, ::testing::Values("gpt2", "gptneox", "bloom", "santacoder"),
                         [](const auto& info) { return info.param; });

// p-tuning: tasks 0 and 1 of the fixture share the FT virtual ids 301-303, which the request reader
// maps to different engine ids (rows of different tables): their blocks are not shared. A request
// of the same task is.
TEST(PrefixSharingPrompts, PTuningTasksWithTheSameIdsShareNothing) {
  const std::string fx = test::prompt_fixtures();
  const auto e = test::load(fx, "gpt2");
  const std::string dir = test::folder_with_tables(test::engine_fixtures() + "/gpt2/1-gpu", fx);
  cpu::CpuBackend be(0);
  dist::SingleRank comm;
  ModelWeights w = ModelWeights::load(dir, 0, 1, be);
  auto tables = PromptTables::from_model_dir(dir, w.config());
  ASSERT_TRUE(tables);
  EngineOptions o = paged(2), of = paged(2, false);
  o.prompts = of.prompts = tables.get();
  Engine eng(w, be, comm, o), fresh(w, be, comm, of);
  for (Engine* x : {&eng, &fresh}) x->reserve(1, 32, 32);
  // e.ids[0]: task 0, [301 302 303 5 17 42 8]; the same FT ids under task 1.
  auto t0 = e.ids[0], t1 = e.ids[0];
  ASSERT_EQ(e.task[0], 0);
  tables->map_ids(t0, 0, "t0");
  tables->map_ids(t1, 1, "t1");
  ASSERT_NE(t0, t1);
  prefill_and_decode(eng, t0, 0, 0);
  const int64_t h0 = eng.kv_cache().stats().prefix_blocks;
  auto got = prefill_and_decode(eng, t1, 0, 3);
  EXPECT_EQ(eng.kv_cache().stats().prefix_blocks, h0) << "another task's table: no hit";
  auto want = prefill_and_decode(fresh, t1, 0, 3);
  for (size_t s = 0; s < want.size(); ++s) EXPECT_TRUE(test::logits_close(got[s].data(), want[s].data(), e.vocab, 1e-5));
  got = prefill_and_decode(eng, t0, 0, 3);
  EXPECT_EQ(eng.kv_cache().stats().prefix_blocks, h0 + 3) << "the same task: its three full blocks";
  want = prefill_and_decode(fresh, t0, 0, 3);
  for (size_t s = 0; s < want.size(); ++s) EXPECT_TRUE(test::logits_close(got[s].data(), want[s].data(), e.vocab, 1e-5));
  expect_no_block_held(eng);
  expect_no_block_held(fresh);
  std::filesystem::remove_all(dir);
}

// Prefix prompts: a request of task t starts with t's K/V. The same tokens after another task's
// prefix are other keys; after the same task's they hit, the prefix's slots included.
TEST(PrefixSharingPrompts, PrefixPromptsOfDifferentTasksShareNothing) {
  const std::string dir = test::prompt_fixtures() + "/prefix/gpt2/1-gpu";
  cpu::CpuBackend be(0);
  dist::SingleRank comm;
  ModelWeights w = ModelWeights::load(dir, 0, 1, be);
  auto tables = PromptTables::from_model_dir(dir, w.config());
  ASSERT_TRUE(tables && tables->prefix());
  const int64_t bs = 2;
  EngineOptions o = paged(bs), of = paged(bs, false);
  o.prompts = of.prompts = tables.get();
  Engine eng(w, be, comm, o), fresh(w, be, comm, of);
  for (Engine* x : {&eng, &fresh}) x->reserve(1, 32, 32);
  const int32_t start = static_cast<int32_t>(tables->start_id());
  const std::vector<int32_t> words = {5, 17, 42, 8, 11, 23, 7};
  auto with_task = [&](int32_t t) {
    std::vector<int32_t> p = {start + t};
    p.insert(p.end(), words.begin(), words.end());
    return p;
  };
  const int64_t len0 = tables->tasks()[0].length, len1 = tables->tasks()[1].length;
  const int64_t V = eng.vocab_size();
  prefill_and_decode(eng, with_task(0), 0, 0);
  const int64_t h0 = eng.kv_cache().stats().prefix_blocks;
  auto got = prefill_and_decode(eng, with_task(1), 0, 3);
  EXPECT_EQ(eng.kv_cache().stats().prefix_blocks, h0) << "task 1 after task 0's prefix: no hit";
  auto want = prefill_and_decode(fresh, with_task(1), 0, 3);
  for (size_t s = 0; s < want.size(); ++s) EXPECT_TRUE(test::logits_close(got[s].data(), want[s].data(), V, 1e-5));
  // Task 0 again: every full block of its slots but the last token's.
  const int64_t slots = len0 + static_cast<int64_t>(words.size());
  got = prefill_and_decode(eng, with_task(0), 0, 3);
  EXPECT_EQ(eng.kv_cache().stats().prefix_blocks - h0, (slots - 1) / bs);
  EXPECT_EQ(eng.row_length(0), 1 + static_cast<int64_t>(words.size()) + 3);
  want = prefill_and_decode(fresh, with_task(0), 0, 3);
  for (size_t s = 0; s < want.size(); ++s) EXPECT_TRUE(test::logits_close(got[s].data(), want[s].data(), V, 1e-5));
  (void)len1;
  expect_no_block_held(eng);
  expect_no_block_held(fresh);
}

}  // namespace
}  // namespace ftx
