#pragma once
// Shared by the tests whose float64 emulation follows the engine's rounding of quantised values
// (engine_w8a8_test, engine_fp8_test; tests/reference/w8a8_follow.py, fp8_follow.py): the engine run
// along the expected greedy paths, a folder for the trace, and the comparison with the followed
// emulation's logits.
#include <gtest/gtest.h>

#include <stdlib.h>  // mkdtemp

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "formats/error.h"

namespace ftx::test {

// Each prompt alone (cache row 0): its prefill, then one decode per token of the expected greedy
// path, so that every traced value is one prompt's rows in position order. at(prompt, step) runs
// before each step; loaded(weights) once the weights are on `be`, quantised as `quant` says.
inline Observed run_prompts_alone(const std::string& dir, const Expected& e, dist::Communicator& comm,
                                  ops::Backend& be, const QuantPolicy& quant,
                                  const std::function<void(const ModelWeights&)>& loaded,
                                  const std::function<void(int64_t, int64_t)>& at) {
  ModelWeights w = ModelWeights::load(dir, comm.rank(), comm.size(), be, quant);
  loaded(w);
  Engine eng(w, be, comm);
  int64_t longest = 0;
  for (size_t b = 0; b < e.prompts.size(); ++b)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(e.prompts[b].size() + e.greedy[b].size()));
  eng.reserve(1, longest, longest);
  std::vector<float> logits(static_cast<size_t>(e.vocab));
  Observed o;
  o.steps.resize(e.prompts.size());
  for (size_t b = 0; b < e.prompts.size(); ++b)
    for (size_t s = 0; s < e.greedy[b].size(); ++s) {
      at(static_cast<int64_t>(b), static_cast<int64_t>(s));
      if (s == 0)
        eng.prefill({e.prompts[b]}, {0}, logits.data());
      else
        eng.decode({e.greedy[b][s - 1]}, {0}, logits.data());
      o.steps[b].push_back(logits);
    }
  return o;
}

// A fresh folder for one case's trace (rank 0 makes it; every rank writes its own files there).
inline std::string trace_dir(dist::Communicator& comm, const std::string& what) {
  char path[256] = {};
  if (comm.rank() == 0) {
    std::string t = env_or("TMPDIR", "/tmp") + "/ftx-" + what + "-trace-XXXXXX";
    if (!mkdtemp(t.data())) throw Error(t, "mkdtemp failed");
    std::snprintf(path, sizeof path, "%s", t.c_str());
  }
  comm.broadcast(path, sizeof path, 0);
  return path;
}

// Runs the follow script `cmd` (it must exit 0: every engine value within its tolerance of the
// emulation's) and checks the engine's logits against the followed emulation's in `out`: within
// 1e-4 × the row's largest |logit| on every step, and every step's greedy token the expected one
// (the unfollowed emulation's). Returns the largest difference, relative to the row's largest.
inline double expect_followed(const std::string& cmd, const std::string& out, const Observed& o, const Expected& e) {
  std::fflush(stdout);
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "the emulation found engine values off its own: " << cmd;
    return -1;
  }
  std::ifstream in(out);
  const auto followed = nlohmann::json::parse(in).at("greedy_logits").get<std::vector<std::vector<std::vector<double>>>>();
  EXPECT_EQ(followed.size(), e.prompts.size());
  double worst = 0;
  for (size_t b = 0; b < e.prompts.size() && b < followed.size(); ++b) {
    EXPECT_EQ(o.steps[b].size(), e.greedy[b].size());
    EXPECT_EQ(followed[b].size(), e.greedy[b].size());
    for (size_t s = 0; s < o.steps[b].size() && s < followed[b].size(); ++s) {
      EXPECT_TRUE(logits_close(o.steps[b][s].data(), followed[b][s].data(), e.vocab, 1e-4))
          << "prompt " << b << " step " << s;
      double scale = 1;
      for (double v : followed[b][s]) scale = std::max(scale, std::fabs(v));
      for (int64_t i = 0; i < e.vocab; ++i)
        worst = std::max(worst, std::fabs(o.steps[b][s][static_cast<size_t>(i)] - followed[b][s][static_cast<size_t>(i)]) / scale);
      const auto& l = o.steps[b][s];
      EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]) << "prompt " << b << " step " << s;
    }
  }
  return worst;
}

// The largest |logit| difference at the prompts' last positions between a quantised emulation and
// the floating-point reference of the same model: a check that the emulation is not the
// floating-point model (a comparison with it would then prove nothing).
inline double largest_prompt_difference(const Expected& quantised, const Expected& fp) {
  double largest = 0;
  for (size_t b = 0; b < quantised.prompts.size(); ++b)
    for (int64_t i = 0; i < quantised.vocab; ++i)
      largest = std::max(largest, std::fabs(quantised.prompt_logits[b][static_cast<size_t>(i)] -
                                            fp.prompt_logits[b][static_cast<size_t>(i)]));
  return largest;
}

// The transformers-5 checkpoints (tests/fixtures/hf5) the quantisation fixtures convert besides
// the engine fixtures (scripts/fixtures/make_w8a8_fixtures.py HF5_MODELS).
inline bool is_hf5_model(const std::string& model) { return model == "llama" || model == "qwen2"; }

// The floating-point model's expected logits for a quantisation fixture model: the engine
// fixture's float64 reference, or for an hf5 checkpoint transformers' float64 logits.
inline Expected float_expected(const std::string& model) {
  if (is_hf5_model(model))
    return load_expected(env_or("FTX_SOURCE_DIR", source_dir_from_here()) + "/tests/fixtures/hf5/" + model);
  return load_expected(engine_fixtures() + "/" + model);
}

}  // namespace ftx::test
