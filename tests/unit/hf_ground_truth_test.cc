// Ground truth from HuggingFace transformers (issue 26): ftx's CPU engine on models that
// transformers itself built and saved (scripts/fixtures/make_hf_ground_truth.py), against the
// logits transformers computes for them in float64.
//
// HfGroundTruth.LogitsMatchTransformers runs only when FTX_HF_GT_MODELS names fixture folders
// (tests/e2e/hf/hf_ground_truth_test.py converts them and runs this binary alone and under
// `mpirun -np 2`). With N ranks it loads <dir>/ft_<kind>/<N>-gpu for each entry of
// FTX_HF_GT_KINDS (default fp32,fp16,bf16; "kind:section" compares folder ft_<kind> with the
// expected.json section of that name, e.g. fp16src:fp16_checkpoint for fp32 files converted from
// a checkpoint saved in fp16) and checks, along transformers' greedy paths, the logits of the
// prefill and of every decode step to kTolerance of the row's largest |logit|
// (engine_test_util.h's logits_close): fp32 files against transformers' float64 logits of the
// saved weights, fp16 / bf16 files against its float64 logits of the weights rounded to that type
// (the expected.json sections "fp16" / "bf16"), since that rounding is the converter's job and the
// engine computes in fp32 from the exactly widened weights. One exception: where the FT folder
// stores a tensor the converter computes from several of transformers' (expected.json's
// "folded_in_half": OPT's project_in/out products, XGLM's sqrt(d_model)-scaled table, GPT-NeoX's
// parallel-residual bias sum), FT's layout rounds the product once while transformers in fp16/bf16
// rounds each factor, so those elements differ by up to half an ulp of the type (u = 2^-11 for fp16,
// 2^-8 for bf16): there the bound is 4u of the row's largest |logit| (seen: 8.6e-4 fp16, 6.8e-3 bf16,
// OPT-350m's shape). Rank 0 prints one line per model and dtype,
// "max_rel_diff <model> <dtype> tp<N> <value>", which the e2e script collects.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine_test_util.h"

namespace ftx {
namespace {

constexpr double kTolerance = 1e-4;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// max_i |got_i - want_i| / max(1, max_j |want_j|): the quantity logits_close bounds.
double relative_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double scale = 1.0, worst = 0.0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  return worst / scale;
}

// Unit roundoff of the weight type: half the distance from 1 to the next value.
double unit_roundoff(const std::string& dtype) { return dtype == "fp16" ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

bool has_folded_tensors(const std::string& dir) {
  std::ifstream in(dir + "/expected.json");
  const auto j = nlohmann::json::parse(in);
  return j.contains("folded_in_half") && !j["folded_in_half"].empty();
}

std::string basename_of(const std::string& dir) {
  const size_t p = dir.find_last_of('/');
  return p == std::string::npos ? dir : dir.substr(p + 1);
}

TEST(HfGroundTruth, LogitsMatchTransformers) {
  const char* env = std::getenv("FTX_HF_GT_MODELS");
  if (!env || !*env) GTEST_SKIP() << "FTX_HF_GT_MODELS not set (tests/e2e/hf/hf_ground_truth_test.py sets it)";
  const auto comm = test::this_process_communicator();
  const auto kinds = split(test::env_or("FTX_HF_GT_KINDS", "fp32,fp16,bf16"));
  for (const std::string& dir : split(env)) {
    for (const std::string& entry : kinds) {
      SCOPED_TRACE(dir + " " + entry);
      const size_t colon = entry.find(':');
      const std::string dt = entry.substr(0, colon);  // the folder, and the type of its files
      const std::string section = colon == std::string::npos ? dt : entry.substr(colon + 1);
      const auto e = test::load_expected(dir, section == "fp32" ? "" : section);
      const bool half_files = dt == "fp16" || dt == "bf16";
      const double tolerance = half_files && has_folded_tensors(dir) ? 4.0 * unit_roundoff(dt) : kTolerance;
      ASSERT_FALSE(e.prompts.empty()) << "expected.json has no section " << section;
      const auto o = test::run_greedy_paths(dir + "/ft_" + dt + "/" + std::to_string(comm->size()) + "-gpu", e, *comm);
      if (comm->rank() != 0) continue;
      ASSERT_EQ(o.steps.size(), e.prompts.size());
      double worst = 0.0;
      for (size_t b = 0; b < e.prompts.size(); ++b) {
        ASSERT_EQ(o.steps[b].size(), e.greedy_logits[b].size());
        for (size_t s = 0; s < o.steps[b].size(); ++s) {
          EXPECT_TRUE(test::logits_close(o.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, tolerance))
              << "tp " << comm->size() << " prompt " << b << " step " << s;
          worst = std::max(worst, relative_diff(o.steps[b][s], e.greedy_logits[b][s]));
        }
      }
      std::printf("max_rel_diff %s %s tp%d %.3e\n", basename_of(dir).c_str(), dt.c_str(), comm->size(), worst);
    }
  }
}

}  // namespace
}  // namespace ftx
