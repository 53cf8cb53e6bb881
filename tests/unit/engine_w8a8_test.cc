// SmoothQuant W8A8 (`--int8-mode 2`) in the CPU engine against the float64 emulation of the same
// quantised arithmetic (tests/reference/int8_reference.py, w8a8_model) on `ftx smoothquant` folders
// of the engine fixtures (scripts/fixtures/make_w8a8_fixtures.py): GPT-2, GPT-J, GPT-NeoX, BLOOM,
// OPT post-LN and SantaCoder (multi-query: K and V whole on every rank), and of the Llama and Qwen2
// checkpoints of tests/fixtures/hf5 converted by convert-hf (grouped-query attention, 2 of 4 KV
// heads, one per rank at TP 2; SwiGLU, whose gate projection is a W8A8 GEMM too; RMSNorm);
// per-tensor and per-token + per-channel on TensorRT-LLM's files, per-tensor on
// FasterTransformer's (`--format ft`). Under `mpirun -np 2` (tests/e2e/quant/w8a8.cmake)
// the TP-2 folders against the emulation's TP-2 section (each rank quantises its own slice of a
// row-parallel GEMM's input). The engine's GEMM inputs are traced and the emulation rerun on them
// (tests/reference/w8a8_follow.py), so that an activation the two round to neighbouring int8 values
// (an fp32 and a float64 value on either side of k + 0.5) does not move every later logit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "engine_test_util.h"
#include "follow_test_util.h"
#include "formats/error.h"

namespace ftx {
namespace {

const std::vector<std::string>& w8a8_models() {
  static const std::vector<std::string> names = {"gpt2",       "gptj",  "gptneox", "bloom", "opt_post",
                                                 "santacoder", "llama", "qwen2"};
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

// The folder of a mode's smoothquant export: FT-format files in their own subfolder.
std::string folder_of(const std::string& mode) { return mode == "ft" ? "/ft" : ""; }

QuantPolicy mode_of(const std::string& mode) {
  QuantPolicy quant;
  quant.smoothquant.on = true;
  quant.smoothquant.per_token = quant.smoothquant.per_channel = mode == "per_token_channel";  // "ft": FT's files, per tensor
  return quant;
}

// A CPU backend that records the fp32 input of every W8A8 GEMM, named by layer and GEMM, so that
// the emulation can follow the engine's rounding (tests/reference/w8a8_follow.py).
class W8A8TracingBackend : public cpu::CpuBackend {
 public:
  struct Call {
    int64_t prompt, step;
    std::string gemm;
    int64_t rows, cols;
    size_t offset;
  };
  W8A8TracingBackend() : cpu::CpuBackend(0) {}  // OMP_NUM_THREADS (ctest sets 2; under mpirun 1 per rank)

  void name_gemms(const ModelWeights& w) {
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const std::string p = std::to_string(l);
      names_[&w.layers[l].qkv_w] = p + ".qkv";
      names_[&w.layers[l].dense_w] = p + ".dense";
      names_[&w.layers[l].fc_w] = p + ".fc1";
      names_[&w.layers[l].gate_w] = p + ".gate";
      names_[&w.layers[l].proj_w] = p + ".fc2";
    }
  }
  void at(int64_t prompt, int64_t step) { prompt_ = prompt, step_ = step; }

  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override {
    if (B.w8a8) {
      const auto it = names_.find(&B);
      if (it == names_.end()) throw Error("engine_w8a8_test", "a W8A8 GEMM on a weight that is not a layer GEMM");
      calls_.push_back({prompt_, step_, it->second, M, K, inputs_.size()});
      inputs_.insert(inputs_.end(), A.fp32(), A.fp32() + M * K);
    }
    cpu::CpuBackend::gemm(M, N, K, A, B, trans_b, C, beta);
  }

  void write(const std::string& dir, int rank) const {
    nlohmann::json calls = nlohmann::json::array();
    for (const Call& c : calls_)
      calls.push_back({{"prompt", c.prompt}, {"step", c.step}, {"gemm", c.gemm}, {"rows", c.rows}, {"cols", c.cols},
                       {"offset", c.offset}});
    std::ofstream(dir + "/index." + std::to_string(rank) + ".json") << nlohmann::json{{"calls", calls}}.dump();
    std::ofstream data(dir + "/data." + std::to_string(rank) + ".bin", std::ios::binary);
    data.write(reinterpret_cast<const char*>(inputs_.data()), static_cast<std::streamsize>(inputs_.size() * 4));
    ASSERT_TRUE(data.good()) << dir << ": writing the trace failed";
  }

 private:
  std::map<const ops::Weight*, std::string> names_;
  std::vector<Call> calls_;
  std::vector<float> inputs_;
  int64_t prompt_ = 0, step_ = 0;
};

test::Observed run_w8a8(const std::string& dir, const test::Expected& e, dist::Communicator& comm,
                        W8A8TracingBackend& be, const std::string& mode) {
  return test::run_prompts_alone(
      dir, e, comm, be, mode_of(mode), [&](const ModelWeights& w) { be.name_gemms(w); },
      [&](int64_t prompt, int64_t step) { be.at(prompt, step); });
}

// Logits within 1e-4 x the row's largest |logit| of the float64 emulation on every step, once the
// emulation takes the engine's rounding where an activation lies within the fp32 error of a
// rounding boundary (w8a8_follow.py asserts every activation the engine quantised equals its own
// within that error, and counts the values it followed); and every step's greedy token is the
// unfollowed emulation's (expected.json).
void expect_matches(const std::string& model, const std::string& mode, int tp, const test::Observed& o,
                    const test::Expected& e, const std::string& trace) {
  const std::string src = test::env_or("FTX_SOURCE_DIR", test::source_dir_from_here());
  const std::string fixture = w8a8_fixtures() + "/" + model;
  const std::string out = trace + "/followed.json";
  const std::string cmd = test::env_or("FTX_TORCH_PYTHON", "/usr/bin/python3") + " " + src +
                          "/tests/reference/w8a8_follow.py --model " + model + " --folder " + fixture +
                          folder_of(mode) + "/1-gpu --mode " + mode + " --tp " + std::to_string(tp) + " --expected " + fixture +
                          "/expected.json --trace " + trace + " --out " + out;
  test::expect_followed(cmd, out, o, e);
}

class EngineW8A8 : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EngineW8A8, MatchesEmulation) {
  if (dist::launched_by_mpi()) GTEST_SKIP() << "the TP-1 case runs without mpirun";
  const auto& [model, mode] = GetParam();
  const std::string dir = w8a8_fixtures() + "/" + model;
  const auto e = test::load_expected(dir, mode + "/tp1");
  ASSERT_FALSE(e.prompts.empty());
  dist::SingleRank comm;
  W8A8TracingBackend be;
  const auto o = run_w8a8(dir + folder_of(mode) + "/1-gpu", e, comm, be, mode);
  const std::string trace = test::trace_dir(comm, "w8a8");
  be.write(trace, 0);
  expect_matches(model, mode, 1, o, e, trace);
  std::filesystem::remove_all(trace);
  // The emulation is not the floating-point model (the check above would then prove nothing):
  // quantising activations and weights moves the logits well beyond the tolerance.
  EXPECT_GT(test::largest_prompt_difference(e, test::float_expected(model)), 1e-3)
      << "W8A8 and fp32 references agree: the test would not see a missing quantisation";
}

TEST_P(EngineW8A8, TwoRanksMatchEmulation) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const auto& [model, mode] = GetParam();
  const std::string dir = w8a8_fixtures() + "/" + model;
  const auto e = test::load_expected(dir, mode + "/tp2");
  ASSERT_FALSE(e.prompts.empty());
  W8A8TracingBackend be;
  const auto o = run_w8a8(dir + folder_of(mode) + "/2-gpu", e, *comm, be, mode);
  const std::string trace = test::trace_dir(*comm, "w8a8");
  be.write(trace, comm->rank());
  comm->barrier();
  if (comm->rank() == 0) {
    expect_matches(model, mode, 2, o, e, trace);
    std::filesystem::remove_all(trace);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineW8A8,
                         ::testing::Combine(::testing::ValuesIn(w8a8_models()),
                                            ::testing::Values("per_tensor", "per_token_channel")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });
// FasterTransformer's files exist for its GPT model (smoothquant --format ft refuses GPT-J and NeoX).
INSTANTIATE_TEST_SUITE_P(FtFiles, EngineW8A8,
                         ::testing::Values(std::make_tuple("gpt2", "ft"), std::make_tuple("bloom", "ft"),
                                           std::make_tuple("opt_post", "ft")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// The four layer GEMMs are held as int8 with one fp32 factor per column; embeddings stay fp32.
TEST(EngineW8A8Weights, LayerGemmsHeldAsInt8) {
  if (dist::launched_by_mpi()) GTEST_SKIP();
  const std::string dir = w8a8_fixtures() + "/gpt2/1-gpu";
  cpu::CpuBackend be(1);
  auto w = ModelWeights::load(dir, 0, 1, be, mode_of("per_tensor"));
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
  try {
    ModelWeights::load(test::engine_fixtures() + "/gpt2/1-gpu", 0, 1, be, mode_of("per_tensor"));
    FAIL() << "loaded a folder smoothquant did not write";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("ftx smoothquant --alpha"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace ftx
