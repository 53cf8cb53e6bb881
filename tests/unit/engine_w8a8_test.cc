// SmoothQuant W8A8 (`--int8-mode 2`) in the CPU engine against the float64 emulation of the same
// quantised arithmetic (tests/reference/int8_reference.py, w8a8_model) on `ftx smoothquant` folders
// of the engine fixtures (scripts/fixtures/make_w8a8_fixtures.py): GPT-2, GPT-J, GPT-NeoX, BLOOM
// and OPT post-LN; per-tensor and per-token + per-channel. Under `mpirun -np 2` (tests/e2e/w8a8.cmake)
// the TP-2 folders against the emulation's TP-2 section (each rank quantises its own slice of a
// row-parallel GEMM's input).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

#include "engine_test_util.h"
#include "formats/error.h"

namespace ftx {
namespace {

const std::vector<std::string>& w8a8_models() {
  static const std::vector<std::string> names = {"gpt2", "gptj", "gptneox", "bloom", "opt_post"};
  return names;
}

// $FTX_FIXTURES/w8a8 (or a /tmp folder outside ctest), made on first use from the engine fixtures
// with this build's ftx.
std::string w8a8_fixtures() {
  const std::string src = test::env_or("FTX_SOURCE_DIR", test::source_dir_from_here());
  const std::string script = src + "/scripts/fixtures/make_w8a8_fixtures.py";
  const std::string engine = test::engine_fixtures();
  const char* f = std::getenv("FTX_FIXTURES");
  const std::string dir = f && *f ? std::string(f) + "/w8a8" : engine + "-w8a8";
  if (!std::ifstream(dir + "/DONE")) {
    const std::string cmd = test::env_or("FTX_TORCH_PYTHON", "/usr/bin/python3") + " " + script + " " + dir + " " +
                            test::env_or("FTX_BIN", FTX_TEST_BIN) + " " + engine + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "fixture script failed: " << cmd;
  }
  return dir;
}

ops::Backend::SmoothQuant mode_of(const std::string& mode) {
  ops::Backend::SmoothQuant sq;
  sq.on = true;
  sq.per_token = sq.per_channel = mode == "per_token_channel";
  return sq;
}

test::Observed run_w8a8(const std::string& dir, const test::Expected& e, dist::Communicator& comm,
                        const std::string& mode) {
  cpu::CpuBackend be(0);  // OMP_NUM_THREADS (ctest sets 2; under mpirun 1 per rank)
  be.set_smoothquant(mode_of(mode));
  return test::run_greedy_paths_on(be, dir, e, comm);
}

// Steps whose quantised activations all lie at least kMargin from a rounding boundary (k + 0.5)
// in the emulation: there fp32 and float64 round every activation alike, and the logits must agree
// within 1e-4 x the row's largest |logit|. The fp32 engine's activations differ from float64 by
// about 1e-5 in these units (a value 1.2e-5 from a boundary has been seen rounded the other way),
// so kMargin is 5e-5. A step with a value closer than that (expected.json "margin"; about half the
// steps here) may have one activation rounded the other way; one int8 step of one activation moves
// the logits by up to ~2e-3 x their largest, so such steps are held to kFlipTolerance. Every step
// must give the emulation's greedy token.
constexpr double kMargin = 5e-5, kFlipTolerance = 2e-2;

std::vector<std::vector<double>> load_margins(const std::string& dir, const std::string& section) {
  std::ifstream in(dir + "/expected.json");
  const auto j = nlohmann::json::parse(in);
  return j.at(nlohmann::json::json_pointer("/" + section + "/margin")).get<std::vector<std::vector<double>>>();
}

void expect_matches(const test::Observed& o, const test::Expected& e, const std::vector<std::vector<double>>& margin) {
  size_t strict = 0, all = 0;
  for (size_t b = 0; b < e.prompts.size(); ++b) {
    ASSERT_EQ(o.steps[b].size(), e.greedy_logits[b].size());
    for (size_t s = 0; s < o.steps[b].size(); ++s) {
      const bool clear = margin[b][s] >= kMargin;
      strict += clear;
      ++all;
      EXPECT_TRUE(test::logits_close(o.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab,
                                     clear ? 1e-4 : kFlipTolerance))
          << "prompt " << b << " step " << s << " (margin " << margin[b][s] << ")";
      const auto& l = o.steps[b][s];
      EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]) << "prompt " << b << " step " << s;
    }
  }
  // A good share of steps is held to 1e-4 (54% over all cases, at least 6 of 24 in each): the test
  // would not pass on the loose bound alone.
  EXPECT_GE(5 * strict, all) << strict << " of " << all << " steps clear of rounding boundaries";
  std::printf("  %zu of %zu steps at 1e-4 (margin >= %g), the rest at %g\n", strict, all, kMargin, kFlipTolerance);
}

class EngineW8A8 : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EngineW8A8, MatchesEmulation) {
  if (dist::launched_by_mpi()) GTEST_SKIP() << "the TP-1 case runs without mpirun";
  const auto& [model, mode] = GetParam();
  const std::string dir = w8a8_fixtures() + "/" + model;
  const auto e = test::load_expected(dir, mode + "/tp1");
  ASSERT_FALSE(e.prompts.empty());
  dist::SingleRank comm;
  expect_matches(run_w8a8(dir + "/1-gpu", e, comm, mode), e,
                 load_margins(dir, mode + "/tp1"));
  // The emulation is not the floating-point model (the check above would then prove nothing):
  // quantising activations and weights moves the logits well beyond the tolerance.
  const auto fp = test::load_expected(test::engine_fixtures() + "/" + model);
  double largest = 0;
  for (size_t b = 0; b < e.prompts.size(); ++b)
    for (int64_t i = 0; i < e.vocab; ++i)
      largest = std::max(largest, std::fabs(e.prompt_logits[b][i] - fp.prompt_logits[b][i]));
  EXPECT_GT(largest, 1e-3) << "W8A8 and fp32 references agree: the test would not see a missing quantisation";
}

TEST_P(EngineW8A8, TwoRanksMatchEmulation) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const auto& [model, mode] = GetParam();
  const std::string dir = w8a8_fixtures() + "/" + model;
  const auto e = test::load_expected(dir, mode + "/tp2");
  ASSERT_FALSE(e.prompts.empty());
  const auto o = run_w8a8(dir + "/2-gpu", e, *comm, mode);
  if (comm->rank() == 0) expect_matches(o, e, load_margins(dir, mode + "/tp2"));
}

INSTANTIATE_TEST_SUITE_P(Models, EngineW8A8,
                         ::testing::Combine(::testing::ValuesIn(w8a8_models()),
                                            ::testing::Values("per_tensor", "per_token_channel")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// The four layer GEMMs are held as int8 with one fp32 factor per column; embeddings stay fp32.
TEST(EngineW8A8Weights, LayerGemmsHeldAsInt8) {
  if (dist::launched_by_mpi()) GTEST_SKIP();
  const std::string dir = w8a8_fixtures() + "/gpt2/1-gpu";
  cpu::CpuBackend be(1);
  be.set_smoothquant(mode_of("per_tensor"));
  auto w = ModelWeights::load(dir, 0, 1, be);
  for (const ops::Weight* m : {&w.layers[0].qkv_w, &w.layers[0].dense_w, &w.layers[0].fc_w, &w.layers[0].proj_w}) {
    EXPECT_EQ(m->dtype, DType::kInt8);
    EXPECT_TRUE(m->w8a8);
    EXPECT_GT(m->act_scale, 0.0f);  // per-tensor: the static scale_x_orig_quant
  }
  EXPECT_EQ(w.wte.dtype, DType::kFloat32);
}

// A folder without the int8 files, or not written by smoothquant, is refused naming what is wrong.
TEST(EngineW8A8Weights, PlainFolderIsRefused) {
  if (dist::launched_by_mpi()) GTEST_SKIP();
  cpu::CpuBackend be(1);
  be.set_smoothquant(mode_of("per_tensor"));
  try {
    ModelWeights::load(test::engine_fixtures() + "/gpt2/1-gpu", 0, 1, be);
    FAIL() << "loaded a folder smoothquant did not write";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("ftx smoothquant --alpha"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace ftx
