#pragma once
// Shared by the p-tuning engine tests (engine_prompt_test, engine_prompt_gpu_test): the prompt
// fixtures (scripts/fixtures/make_prompt_fixtures.py, made on first use), their float64 references,
// model folders with the tables added, and the logits along the reference's greedy paths.
#include <unistd.h>

#include <filesystem>

#include "engine_test_util.h"
#include "formats/ft_dir.h"
#include "lib/convert/prompt_source.h"
#include "lib/engine/prompt_tables.h"

namespace ftx::test {

inline std::string prompt_fixtures() {
  const std::string dir = env_or("FTX_FIXTURES", "/tmp/ftx-prompt-fixtures-" + std::to_string(::getuid())) + "/prompt";
  if (!std::ifstream(dir + "/DONE")) {
    const std::string script =
        env_or("FTX_SOURCE_DIR", source_dir_from_here()) + "/scripts/fixtures/make_prompt_fixtures.py";
    const std::string cmd = env_or("FTX_TORCH_PYTHON", "/usr/bin/python3") + " " + script + " " + dir + " > /dev/null";
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

// p-tuning: generate.json's entry for `model`; prefix prompts (prefix = true): prefix/<model>/expected.json,
// or its section `variant` (e.g. "int8_kv_cache": greedy paths and logits of its own).
inline PromptExpected load(const std::string& fixtures, const std::string& model, bool prefix = false,
                           const std::string& variant = "") {
  std::ifstream in(prefix ? fixtures + "/prefix/" + model + "/expected.json" : fixtures + "/generate.json");
  auto j = nlohmann::json::parse(in);
  if (!prefix) j = j[model];
  PromptExpected e;
  e.vocab = j["vocab_size"].get<int64_t>();
  for (auto& r : j["requests"]) {
    e.ids.push_back(r["ids"].get<std::vector<int32_t>>());
    e.task.push_back(r["task"].is_null() ? -1 : r["task"].get<int64_t>());
  }
  const nlohmann::json& paths = variant.empty() ? j : j.at(variant);
  e.greedy = paths["greedy"].get<std::vector<std::vector<int32_t>>>();
  e.greedy_logits = paths["greedy_logits"].get<std::vector<std::vector<std::vector<double>>>>();
  return e;
}

// A private copy of an engine fixture folder with the classic.nemo tables added.
inline std::string folder_with_tables(const std::string& src, const std::string& fixtures) {
  namespace fs = std::filesystem;
  const std::string dst = fs::temp_directory_path().string() + "/ftx-prompt-test-" + std::to_string(::getpid()) + "-" +
                          fs::path(src).parent_path().filename().string() + "-" + fs::path(src).filename().string();
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  add_prompt_tables(read_prompt_nemo(fixtures + "/classic.nemo"), dst, -1, false);
  return dst;
}

// Logits along the reference's greedy paths of the requests `which`, run as one batch.
// On `be` (default: the CPU backend), quantised as `quant` says.
inline std::vector<std::vector<std::vector<float>>> run_paths(const std::string& dir, const PromptExpected& e,
                                                              const std::vector<size_t>& which, dist::Communicator& comm,
                                                              ops::Backend* backend = nullptr,
                                                              const QuantPolicy& quant = {}) {
  cpu::CpuBackend cpu_be(0);
  ops::Backend& be = backend ? *backend : cpu_be;
  ModelWeights w = ModelWeights::load(dir, comm.rank(), comm.size(), be, quant);
  auto tables = PromptTables::from_model_dir(dir, w.config(), comm.rank(), comm.size());
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

inline const std::vector<std::string>& prompt_models() {
  static const std::vector<std::string> m = {"gpt2", "gptnext"};
  return m;
}

}  // namespace ftx::test
