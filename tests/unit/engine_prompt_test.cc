// p-tuning in the engine (issue 13): the engine fixtures gpt2 (fp16 files) and gptnext (NeMo
// GPT-Next, fp32) with the tables of scripts/fixtures/make_prompt_fixtures.py's classic.nemo added
// the FT way (add_prompt_tables, as `ftx prompt-convert --model-dir`). A mixed batch (three tasks
// and a request with no task; virtual tokens first, and in the middle of a prompt) and each
// request alone: logits along the reference's greedy paths within 1e-4 of the float64 reference
// that substitutes the embeddings (tests/reference/gpt_reference.py `embeds`). Under
// `mpirun -np 2` (tests/e2e/prompt.cmake) the 2-gpu folders: equal to 1 rank within 1e-5.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "engine_test_util.h"
#include "formats/ft_dir.h"
#include "lib/convert/prompt_source.h"
#include "lib/engine/prompt_tables.h"

namespace ftx {
namespace {

std::string prompt_fixtures() {
  const std::string dir = test::env_or("FTX_FIXTURES", "/tmp/ftx-prompt-fixtures-" + std::to_string(::getuid())) + "/prompt";
  if (!std::ifstream(dir + "/DONE")) {
    const std::string script =
        test::env_or("FTX_SOURCE_DIR", test::source_dir_from_here()) + "/scripts/fixtures/make_prompt_fixtures.py";
    const std::string cmd = test::env_or("FTX_TORCH_PYTHON", "/usr/bin/python3") + " " + script + " " + dir + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "fixture script failed: " << cmd;
  }
  return dir;
}

struct PromptExpected {
  int64_t vocab = 0;
  std::vector<std::vector<int32_t>> ids, greedy;
  std::vector<int64_t> task;
  std::vector<std::vector<std::vector<double>>> greedy_logits;  // [request][step][V]
};

PromptExpected load(const std::string& fixtures, const std::string& model) {
  std::ifstream in(fixtures + "/generate.json");
  auto j = nlohmann::json::parse(in)[model];
  PromptExpected e;
  e.vocab = j["vocab_size"].get<int64_t>();
  for (auto& r : j["requests"]) {
    e.ids.push_back(r["ids"].get<std::vector<int32_t>>());
    e.task.push_back(r["task"].is_null() ? -1 : r["task"].get<int64_t>());
  }
  e.greedy = j["greedy"].get<std::vector<std::vector<int32_t>>>();
  e.greedy_logits = j["greedy_logits"].get<std::vector<std::vector<std::vector<double>>>>();
  return e;
}

// A private copy of an engine fixture folder with the classic.nemo tables added.
std::string folder_with_tables(const std::string& src, const std::string& fixtures) {
  namespace fs = std::filesystem;
  const std::string dst = fs::temp_directory_path().string() + "/ftx-prompt-test-" + std::to_string(::getpid()) + "-" +
                          fs::path(src).parent_path().filename().string() + "-" + fs::path(src).filename().string();
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  add_prompt_tables(read_prompt_nemo(fixtures + "/classic.nemo"), dst, -1, false);
  return dst;
}

// Logits along the reference's greedy paths of the requests `which`, run as one batch.
std::vector<std::vector<std::vector<float>>> run_paths(const std::string& dir, const PromptExpected& e,
                                                       const std::vector<size_t>& which, dist::Communicator& comm) {
  cpu::CpuBackend be(0);
  ModelWeights w = ModelWeights::load(dir, comm.rank(), comm.size(), be);
  auto tables = PromptTables::from_model_dir(dir, w.config());
  EXPECT_TRUE(tables != nullptr);
  EngineOptions eo;
  eo.prompts = tables.get();
  Engine eng(w, be, comm, eo);
  const int64_t B = static_cast<int64_t>(which.size()), V = e.vocab;
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = 0, steps = 0;
  for (size_t i : which) {
    auto ids = e.ids[i];
    tables->map_ids(ids, e.task[i], "request " + std::to_string(i));
    prompts.push_back(ids);
    longest = std::max<int64_t>(longest, ids.size());
    steps = std::max<int64_t>(steps, e.greedy[i].size());
  }
  eng.reserve(B, longest + steps, B * longest);
  std::vector<int32_t> rows;
  for (int64_t b = 0; b < B; ++b) rows.push_back(static_cast<int32_t>(b));
  std::vector<float> logits(static_cast<size_t>(B * V));
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(B));
  eng.prefill(prompts, rows, logits.data());
  for (int64_t b = 0; b < B; ++b) out[b].emplace_back(logits.begin() + b * V, logits.begin() + (b + 1) * V);
  for (int64_t s = 1; s < steps; ++s) {
    std::vector<int32_t> feed, active;
    for (int64_t b = 0; b < B; ++b)
      if (static_cast<int64_t>(e.greedy[which[b]].size()) > s) {
        feed.push_back(e.greedy[which[b]][s - 1]);
        active.push_back(static_cast<int32_t>(b));
      }
    eng.decode(feed, active, logits.data());
    for (size_t i = 0; i < active.size(); ++i)
      out[active[i]].emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
  }
  return out;
}

const std::vector<std::string> kModels = {"gpt2", "gptnext"};

TEST(EnginePromptTuning, MixedBatchAndSingleRequestsMatchReference) {
  if (dist::launched_by_mpi()) GTEST_SKIP() << "the TP=2 test runs under mpirun";
  const std::string fx = prompt_fixtures(), eng = test::engine_fixtures();
  dist::SingleRank single;
  for (const auto& m : kModels) {
    SCOPED_TRACE(m);
    const auto e = load(fx, m);
    const std::string dir = folder_with_tables(eng + "/" + m + "/1-gpu", fx);
    std::vector<size_t> all;
    for (size_t i = 0; i < e.ids.size(); ++i) all.push_back(i);
    const auto batch = run_paths(dir, e, all, single);
    for (size_t i = 0; i < all.size(); ++i) {
      const auto alone = run_paths(dir, e, {i}, single);
      ASSERT_EQ(batch[i].size(), e.greedy_logits[i].size());
      for (size_t s = 0; s < batch[i].size(); ++s) {
        EXPECT_TRUE(test::logits_close(batch[i][s].data(), e.greedy_logits[i][s].data(), e.vocab, 1e-4))
            << "request " << i << " step " << s << " (batch)";
        EXPECT_TRUE(test::logits_close(alone[0][s].data(), e.greedy_logits[i][s].data(), e.vocab, 1e-4))
            << "request " << i << " step " << s << " (alone)";
      }
    }
    std::filesystem::remove_all(dir);
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
  for (const auto& m : kModels) {
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
