// Beam search against an independent float64 PyTorch reference (tests/reference/
// beam_search_reference.py, written from FT's definition): random logits sequences, several
// widths, length penalties and diversity rates. Tokens and parents must match exactly, log probs
// within 1e-6. Paths: FTX_SOURCE_DIR / FTX_TORCH_PYTHON, else the build's (tests/e2e/generate/decoding_beam_reference.cmake).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "lib/decoding/decoder.h"

namespace ftx {
namespace {

using nlohmann::json;

// Build-time defaults from tests/e2e/generate/decoding_beam_reference.cmake; the environment overrides them.
#ifdef FTX_DECODING_SOURCE_DIR
constexpr const char* kSourceDir = FTX_DECODING_SOURCE_DIR;
constexpr const char* kTorchPython = FTX_DECODING_TORCH_PYTHON;
#else
constexpr const char* kSourceDir = nullptr;
constexpr const char* kTorchPython = nullptr;
#endif

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

struct Case {
  int64_t vocab, beam_width, prompt_len, max_new_tokens;
  int32_t end_id;
  double len_penalty, diversity_rate;
  std::vector<std::vector<std::vector<float>>> logits;  // [step][row][vocab]
};

Case make_case(uint64_t seed, int64_t K, double lp, double d, int64_t prompt_len) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  Case c{40, K, prompt_len, 9, 7, lp, d, {}};
  for (int64_t s = 0; s < c.max_new_tokens; ++s) {
    std::vector<std::vector<float>> step(K, std::vector<float>(c.vocab));
    for (int64_t r = 0; r < K; ++r) {
      if (s == 0 && r > 0) {  // the first step: every beam sees the prompt's logits
        step[r] = step[0];
        continue;
      }
      std::vector<float>& row = step[r];
      for (float& v : row) v = static_cast<float>(normal(gen));
      // Make end_id likely now and then, so some beams finish early and keep competing.
      if (coin(gen) < 0.3) row[c.end_id] = static_cast<float>(4.0 + normal(gen) * 0.5);
    }
    c.logits.push_back(std::move(step));
  }
  return c;
}

json to_json(const Case& c) {
  return {{"vocab", c.vocab}, {"beam_width", c.beam_width}, {"prompt_len", c.prompt_len},
          {"max_new_tokens", c.max_new_tokens}, {"end_id", c.end_id}, {"len_penalty", c.len_penalty},
          {"diversity_rate", c.diversity_rate}, {"logits", c.logits}};
}

TEST(DecodingBeamReference, MatchesTorchFloat64Reference) {
  const char* src = env_or("FTX_SOURCE_DIR", kSourceDir);
  const char* python = env_or("FTX_TORCH_PYTHON", kTorchPython);
  if (!src || !python) GTEST_SKIP() << "FTX_SOURCE_DIR / FTX_TORCH_PYTHON not set";

  std::vector<Case> cases;
  uint64_t seed = 100;
  for (int64_t K : {2, 3, 4}) {
    for (double lp : {0.0, 1.0, 2.5}) {
      for (double d : {0.0, -0.7}) {
        const int64_t prompt_len = 1 + static_cast<int64_t>(seed % 4);
        cases.push_back(make_case(seed++, K, lp, d, prompt_len));
      }
    }
  }
  json in = {{"cases", json::array()}};
  for (const Case& c : cases) in["cases"].push_back(to_json(c));

  const auto dir = std::filesystem::temp_directory_path() / ("ftx_beam_ref_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto in_path = dir / "in.json";
  const auto out_path = dir / "out.json";
  std::ofstream(in_path) << in.dump();
  const std::string cmd = std::string(python) + " " + src + "/tests/reference/beam_search_reference.py " +
                          in_path.string() + " " + out_path.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  json out;
  std::ifstream(out_path) >> out;
  std::filesystem::remove_all(dir);
  ASSERT_EQ(out["cases"].size(), cases.size());

  int finished_early = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const json& ref = out["cases"][i];
    SCOPED_TRACE("case " + std::to_string(i) + " K=" + std::to_string(c.beam_width) +
                 " lp=" + std::to_string(c.len_penalty) + " d=" + std::to_string(c.diversity_rate));
    DecodeRequest req;
    req.input_ids.assign(c.prompt_len, 1);
    req.max_new_tokens = c.max_new_tokens;
    req.sampling.beam_width = c.beam_width;
    req.sampling.end_id = c.end_id;
    req.sampling.len_penalty = c.len_penalty;
    req.sampling.beam_search_diversity_rate = c.diversity_rate;
    req.sampling.return_log_probs = true;
    Decoder decoder({req}, c.vocab);
    size_t step = 0;
    for (; step < c.logits.size() && !decoder.all_finished(); ++step) {
      std::vector<float> flat;
      for (const auto& row : c.logits[step]) flat.insert(flat.end(), row.begin(), row.end());
      const StepOutput& o = decoder.step(flat.data());
      ASSERT_LT(step, ref["steps"].size());
      EXPECT_EQ(o.tokens, ref["steps"][step]["tokens"].get<std::vector<int32_t>>()) << "step " << step;
      std::vector<int32_t> parents = ref["steps"][step]["parents"].get<std::vector<int32_t>>();
      EXPECT_EQ(o.parents, parents) << "step " << step;
    }
    EXPECT_EQ(step, ref["steps"].size());
    const auto results = decoder.results();
    ASSERT_EQ(results[0].beams.size(), static_cast<size_t>(c.beam_width));
    for (int64_t k = 0; k < c.beam_width; ++k) {
      const BeamResult& b = results[0].beams[k];
      const json& rb = ref["beams"][k];
      EXPECT_EQ(b.output_ids, rb["output_ids"].get<std::vector<int32_t>>()) << "beam " << k;
      EXPECT_NEAR(b.cum_log_prob, rb["cum_log_prob"].get<double>(), 1e-6) << "beam " << k;
      const auto lps = rb["output_log_probs"].get<std::vector<double>>();
      ASSERT_EQ(b.output_log_probs.size(), lps.size());
      for (size_t t = 0; t < lps.size(); ++t) {
        EXPECT_NEAR(b.output_log_probs[t], lps[t], 1e-6 + 1e-6 * std::abs(lps[t])) << "beam " << k << " t " << t;
      }
      if (static_cast<int64_t>(b.output_ids.size()) < c.max_new_tokens) ++finished_early;
    }
  }
  EXPECT_GT(finished_early, 10);  // the cases do exercise finished beams
}

}  // namespace
}  // namespace ftx
