// ModelWeights::load refuses folders that do not match config.ini: each case is an ftx::Error whose
// message names the file and the numbers involved.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine_test_util.h"
#include "formats/error.h"

namespace fs = std::filesystem;

namespace ftx {
namespace {

class EngineWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = test::engine_fixtures() + "/gpt2/1-gpu";
    dir_ = fs::temp_directory_path() / ("ftx-engine-weights-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(src_, dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The message of the Error load() throws ("" when it does not throw).
  std::string load_error(int tp = 1) {
    cpu::CpuBackend be(1);
    try {
      ModelWeights::load(dir_.string(), 0, tp, be);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string src_;
  fs::path dir_;
};

TEST_F(EngineWeights, LoadsTheFixture) { EXPECT_EQ(load_error(), ""); }

TEST_F(EngineWeights, TruncatedFileNamesBytesFoundAndExpected) {
  const auto f = dir_ / "model.layers.1.mlp.dense_h_to_4h.weight.0.bin";
  fs::resize_file(f, 1000);
  const auto msg = load_error();
  EXPECT_NE(msg.find("model.layers.1.mlp.dense_h_to_4h.weight.0.bin: 1000 bytes, expected 32768 (fp16 [64, 256] from config.ini)"),
            std::string::npos) << msg;
}

TEST_F(EngineWeights, MissingFile) {
  fs::remove(dir_ / "model.final_layernorm.bias.bin");
  const auto msg = load_error();
  EXPECT_NE(msg.find("model.final_layernorm.bias.bin: missing weight file (expected 128 bytes"), std::string::npos)
      << msg;
}

TEST_F(EngineWeights, UnexpectedExtraFile) {
  fs::copy_file(dir_ / "model.wte.bin", dir_ / "model.layers.7.attention.dense.bias.bin");
  const auto msg = load_error();
  EXPECT_NE(msg.find("model.layers.7.attention.dense.bias.bin: unexpected weight file"), std::string::npos) << msg;
}

TEST_F(EngineWeights, ConfigMissingKey) {
  std::ifstream in(dir_ / "config.ini");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const auto p = text.find("num_layer = 2\n");
  ASSERT_NE(p, std::string::npos);
  text.erase(p, 14);
  std::ofstream(dir_ / "config.ini") << text;
  const auto msg = load_error();
  EXPECT_NE(msg.find("num_layer"), std::string::npos) << msg;
}

TEST_F(EngineWeights, WrongRankCount) {
  const auto msg = load_error(2);
  EXPECT_NE(msg.find("model folder was converted for tensor parallel size 1; run with `mpirun -np 1` or convert "
                     "again with -g 2"),
            std::string::npos)
      << msg;
}

TEST_F(EngineWeights, ManifestSizeMismatch) {
  std::ofstream(dir_ / "manifest.json") << R"({"files": [{"name": "model.wte.bin", "bytes": 12}]})";
  const auto msg = load_error();
  EXPECT_NE(msg.find("model.wte.bin: 38528 bytes, manifest.json says 12"), std::string::npos) << msg;
}

// A dtype this build does not name (a newer writer's, e.g. an FP8 variant) is not an error: the file is
// still checked by size and checksum.
TEST_F(EngineWeights, ManifestUnknownDtypeIsCheckedByteWise) {
  std::ofstream(dir_ / "manifest.json")
      << R"({"files": [{"file": "model.wte.bin", "dtype": "float4_e2m1", "bytes": 38528, "crc32": 0}]})";
  const auto msg = load_error();
  EXPECT_NE(msg.find("model.wte.bin: checksum "), std::string::npos) << msg;
  EXPECT_NE(msg.find(", manifest.json says 00000000"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ftx
