// INT4 weight-only in the engine (--weight-only-precision int4, and folders whose config.ini says
// weight_only_precision = int4): the layer GEMMs quantised at load or read from the folder's INT4
// files, held in 4 bits, and the logits along the greedy paths of a float64 emulation
// (tests/reference/int4_reference.py, expected.json "int4_weight_only") within 1e-4. TP 2 is
// engine_tp_test.cc's. Also the other pre-quantised weight-only folder, weight_only_precision = int8
// (lib/model/int8_files.h, what convert-hf's compressed-tensors W8A16 import writes): its INT8 files
// run with --int8-mode 1's arithmetic.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "formats/error.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/dist/communicator.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/runtime.h"
#include "lib/engine/w8a8_weights.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/int4_files.h"
#include "lib/model/int8_files.h"
#include "lib/model/model_dir.h"
#include "lib/ops/host_math.h"
#include "lib/ops/int4_matrix.h"

namespace ftx {
namespace {

namespace fs = std::filesystem;

struct Variant {
  const char* name;  // expected.json's int4_weight_only/tp1_<name>
  int64_t group_size;
  bool zero_points;
};
const Variant kVariants[] = {{"g16", 16, false}, {"g16_zp", 16, true}, {"channel", 0, false}};

QuantPolicy int4_policy(const Variant& v) {
  QuantPolicy q;
  q.int4.on = true;
  q.int4.group_size = v.group_size;
  q.int4.zero_points = v.zero_points;
  return q;
}

class EngineInt4Reference : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return test::engine_fixtures() + "/" + GetParam(); }
};

// Quantised at load: logits within 1e-4 of the emulation's along its greedy paths, the same tokens;
// and the emulation is far from the floating-point model, so a run that skipped the quantisation
// (or quantised by another rule: see the zero-point variant against the symmetric one) would fail.
TEST_P(EngineInt4Reference, QuantisedAtLoadMatchesEmulation) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    const auto e = test::load_expected(dir(), std::string("int4_weight_only/tp1_") + v.name);
    ASSERT_FALSE(e.prompts.empty()) << "no INT4 reference for " << GetParam();
    dist::SingleRank comm;
    cpu::CpuBackend be(0);
    const auto o = test::run_greedy_paths_on(be, dir() + "/1-gpu", e, comm, {}, int4_policy(v));
    test::expect_greedy_paths_match(o, e, 1e-4);
    EXPECT_GT(test::largest_prompt_logit_gap(e, test::load_expected(dir())), 1e-3)
        << "the INT4 emulation equals the floating-point model: the test would not see a missing quantisation";
  }
  const auto sym = test::load_expected(dir(), "int4_weight_only/tp1_g16");
  const auto zp = test::load_expected(dir(), "int4_weight_only/tp1_g16_zp");
  EXPECT_GT(test::largest_prompt_logit_gap(sym, zp), 1e-3) << "the two INT4 rules give the same logits";
}

// With --int8-lm-head: the 4-bit layers and the lm_head table in int8 (one scale per vocabulary
// row), as llama.cpp's q4 files pair 4-bit layers with a wider head. Within 1e-4 of the emulation
// that quantises both, which the 4-bit emulation with a float head must not also pass.
TEST_P(EngineInt4Reference, Int8HeadMatchesEmulation) {
  const auto e = test::load_expected(dir(), "int4_weight_only/tp1_g16_head");
  ASSERT_FALSE(e.prompts.empty()) << "no INT4 + int8 head reference for " << GetParam();
  dist::SingleRank comm;
  cpu::CpuBackend be(0);
  QuantPolicy q = int4_policy(kVariants[0]);
  q.int8_lm_head = true;
  const auto o = test::run_greedy_paths_on(be, dir() + "/1-gpu", e, comm, {}, q);
  test::expect_greedy_paths_match(o, e, 1e-4);
  EXPECT_GT(test::largest_prompt_logit_gap(e, test::load_expected(dir(), "int4_weight_only/tp1_g16")), 1e-3)
      << "the int8 head changes nothing: the test would not see a float head";
}

INSTANTIATE_TEST_SUITE_P(Models, EngineInt4Reference, ::testing::ValuesIn(test::engine_int8_model_names()),
                         [](const auto& info) { return info.param; });

// The layer matrices are held in 4 bits: half a byte per weight plus, per group of 16 rows, a scale
// (and a zero point); the embeddings and lm_head stay floating point.
TEST(EngineInt4, WeightsHeldInFourBits) {
  const std::string dir = test::engine_fixtures() + "/gpt2/1-gpu";
  cpu::CpuBackend fp(1), q(1);
  for (const Variant& v : {kVariants[0], kVariants[1]}) {
    SCOPED_TRACE(v.name);
    auto wf = ModelWeights::load(dir, 0, 1, fp);
    auto wq = ModelWeights::load(dir, 0, 1, q, int4_policy(v));
    ASSERT_TRUE(wq.layers[0].qkv_w.int4);
    EXPECT_EQ(ops::weight_kind(wq.layers[0].qkv_w), ops::WeightKind::kInt4Groups);
    EXPECT_EQ(wq.wte.dtype, DType::kFloat32);
    size_t saved = 0;
    for (const FtWeightFile& f : ft_weight_files(wf.config(), 1)) {
      if (f.name.rfind("model.layers.", 0) != 0 || f.shape.size() < 2) continue;
      const size_t n = static_cast<size_t>(f.numel()), cols = n / static_cast<size_t>(f.shape[0]);
      const size_t groups = static_cast<size_t>((f.shape[0] + 15) / 16);
      saved += n * 4 - (n / 2 + groups * cols * (v.zero_points ? 5 : 4));
    }
    ASSERT_GT(saved, 0u);
    EXPECT_EQ(wf.bytes() - wq.bytes(), saved);
  }
}

// A copy of `src` (an FT folder) whose layer GEMMs are INT4 files made by `quantize` from the float
// files, which are removed; config.ini says weight_only_precision = int4.
void make_int4_folder(const std::string& src, const std::string& dst, int64_t group_size, bool zero_points) {
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  ModelConfig cfg = read_model_config(dst);
  for (const FtWeightFile& f : ft_weight_files(cfg, cfg.tensor_para_size)) {
    std::string gemm;
    if (f.shape.size() < 2 || !is_w8a8_gemm(f.name, &gemm)) continue;
    const std::string path = dst + "/" + f.file_name();
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int64_t rows = f.shape.front(), cols = f.numel() / rows;
    const ops::Int4Matrix m = ops::quantize_int4(bytes.data(), cfg.weight_data_type, rows, cols, group_size, zero_points);
    auto write = [&](const std::string& name, const void* p, size_t n) {
      std::ofstream out(dst + "/" + name + "." + std::to_string(f.rank) + ".bin", std::ios::binary);
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    write(int4_values_name(gemm), m.packed.data(), m.packed.size());
    write(int4_scales_name(gemm), m.scales.data(), m.scales.size() * sizeof(float));
    if (zero_points) write(int4_zeros_name(gemm), m.zeros.data(), m.zeros.size());
    fs::remove(path);
  }
  cfg.weight_only_precision = WeightOnlyPrecision::kInt4;
  cfg.int4_group_size = group_size;
  cfg.to_ini().write(dst + "/config.ini");
}

// A folder that holds INT4 files runs as INT4 without a flag, with the logits of the same emulation.
TEST(EngineInt4, FolderOfInt4FilesMatchesEmulation) {
  const std::string root = test::engine_fixtures() + "/gptj";
  const std::string dst = ::testing::TempDir() + "/int4-folder-gptj";
  for (const Variant& v : {kVariants[0], kVariants[1]}) {
    SCOPED_TRACE(v.name);
    make_int4_folder(root + "/1-gpu", dst, v.group_size, v.zero_points);
    ModelWeights::check_files(dst, read_model_config(dst), 1);
    const auto e = test::load_expected(root, std::string("int4_weight_only/tp1_") + v.name);
    dist::SingleRank comm;
    cpu::CpuBackend be(0);
    const auto o = test::run_greedy_paths_on(be, dst, e, comm);
    test::expect_greedy_paths_match(o, e, 1e-4);
  }
  fs::remove_all(dst);
}

// What an INT4 folder cannot do, each an Error naming the file: another quantisation of the same
// GEMMs, a missing INT4 file, a scales file of the wrong size.
TEST(EngineInt4, FolderRefusals) {
  const std::string root = test::engine_fixtures() + "/gpt2";
  const std::string dst = ::testing::TempDir() + "/int4-folder-gpt2";
  make_int4_folder(root + "/1-gpu", dst, 16, false);
  cpu::CpuBackend be(1);
  QuantPolicy int8;
  int8.int8_weight_only = true;
  try {
    ModelWeights::load(dst, 0, 1, be, int8);
    ADD_FAILURE() << "an INT4 folder loaded with --int8-mode 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.ini"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--int8-mode 1"), std::string::npos) << e.what();
  }
  const std::string scales = dst + "/" + int4_scales_name("model.layers.1.mlp.dense_4h_to_h") + ".0.bin";
  fs::resize_file(scales, fs::file_size(scales) - 4);
  try {
    ModelWeights::load(dst, 0, 1, be);
    ADD_FAILURE() << "a short scales file loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(scales), std::string::npos) << e.what();
  }
  const std::string values = dst + "/" + int4_values_name("model.layers.0.attention.dense") + ".0.bin";
  fs::remove(values);
  try {
    ModelWeights::check_files(dst, read_model_config(dst), 1);
    ADD_FAILURE() << "a missing INT4 file passed the check";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(values), std::string::npos) << e.what();
  }
  fs::remove_all(dst);
}

// A group that a tensor-parallel split would cut is refused by name (GPT-2's row-parallel GEMMs
// have 64 and 256 input rows: 48-row groups do not divide a rank's 32).
TEST(EngineInt4, GroupAcrossRanksIsRefused) {
  const ops::Int4Matrix m = [] {
    std::vector<float> w(96 * 4, 0.5f);
    return ops::quantize_int4(w.data(), DType::kFloat32, 96, 4, 32, false);
  }();
  EXPECT_NO_THROW(ops::int4_rows(m, 32, 32, "x"));
  try {
    ops::int4_rows(m, 48, 48, "model.layers.0.attention.dense");
    ADD_FAILURE() << "a split through a group";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("group of 32 rows"), std::string::npos) << e.what();
  }
}

// The flags: INT4 with another quantisation of the layer GEMMs, or a negative group size, is a
// UsageError before anything loads.
TEST(EngineInt4, RuntimeRefusals) {
  RuntimeOptions o;
  o.int4 = true;
  o.int8_mode = 1;
  EXPECT_THROW(make_runtime(o), UsageError);
  o.int8_mode = 0;
  o.fp8 = true;
  EXPECT_THROW(make_runtime(o), UsageError);
  o.fp8 = false;
  o.int4_group_size = -1;
  EXPECT_THROW(make_runtime(o), UsageError);
  // --int8-lm-head joins INT4 as it joins weight-only INT8: no refusal of the pair.
  o.int4_group_size = 128;
  o.int8_lm_head = true;
  EXPECT_NO_THROW(make_runtime(o));
}

// A copy of `src` whose layer GEMMs are INT8 files quantised by FT's per-column rule (the rule
// --int8-mode 1 applies at load, ops::quantize_int8_columns), the float files removed; config.ini
// says weight_only_precision = int8.
void make_int8_folder(const std::string& src, const std::string& dst) {
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  ModelConfig cfg = read_model_config(dst);
  for (const FtWeightFile& f : ft_weight_files(cfg, cfg.tensor_para_size)) {
    std::string gemm;
    if (f.shape.size() < 2 || !is_w8a8_gemm(f.name, &gemm)) continue;
    const std::string path = dst + "/" + f.file_name();
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int64_t rows = f.shape.front(), cols = f.numel() / rows;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    ops::convert_weight(bytes.data(), cfg.weight_data_type, w.data(), DType::kFloat32, w.size());
    std::vector<int8_t> q(w.size());
    std::vector<float> s(static_cast<size_t>(cols));
    ops::quantize_int8_columns(w.data(), rows, cols, q.data(), s.data());
    auto write = [&](const std::string& name, const void* p, size_t n) {
      std::ofstream out(dst + "/" + name + "." + std::to_string(f.rank) + ".bin", std::ios::binary);
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    write(int8_values_name(gemm), q.data(), q.size());
    write(int8_scales_name(gemm), s.data(), s.size() * sizeof(float));
    fs::remove(path);
  }
  cfg.weight_only_precision = WeightOnlyPrecision::kInt8;
  cfg.to_ini().write(dst + "/config.ini");
}

// A folder of INT8 files runs as weight-only INT8 without a flag (and with --int8-mode 1, its own
// arithmetic): the logits of --int8-mode 1's emulation (expected.json int8_weight_only/tp1) within
// 1e-4 along its greedy paths, the matrices held in int8.
TEST(EngineInt8Files, FolderOfInt8FilesMatchesInt8ModeOne) {
  for (const char* model : {"gpt2", "gptj"}) {
    SCOPED_TRACE(model);
    const std::string root = test::engine_fixtures() + "/" + model;
    const std::string dst = ::testing::TempDir() + "/int8-folder-" + model;
    make_int8_folder(root + "/1-gpu", dst);
    ModelWeights::check_files(dst, read_model_config(dst), 1);
    const auto e = test::load_expected(root, "int8_weight_only/tp1");
    ASSERT_FALSE(e.prompts.empty());
    QuantPolicy mode1;
    mode1.int8_weight_only = true;
    for (const QuantPolicy& q : {QuantPolicy{}, mode1}) {
      dist::SingleRank comm;
      cpu::CpuBackend be(0);
      const auto o = test::run_greedy_paths_on(be, dst, e, comm, {}, q);
      test::expect_greedy_paths_match(o, e, 1e-4);
    }
    cpu::CpuBackend be(1);
    auto w = ModelWeights::load(dst, 0, 1, be);
    EXPECT_EQ(w.layers[0].qkv_w.dtype, DType::kInt8);
    EXPECT_EQ(ops::weight_kind(w.layers[0].qkv_w), ops::WeightKind::kInt8Columns);
    EXPECT_EQ(w.wte.dtype, DType::kFloat32);
    fs::remove_all(dst);
  }
}

// What an INT8 folder cannot do, each an Error naming the file: another quantisation of the same
// GEMMs (--int8-mode 2, --fp8, --weight-only-precision int4), a scales file of the wrong size, a
// missing INT8 file.
TEST(EngineInt8Files, FolderRefusals) {
  const std::string dst = ::testing::TempDir() + "/int8-folder-refusals";
  make_int8_folder(test::engine_fixtures() + "/gpt2/1-gpu", dst);
  cpu::CpuBackend be(1);
  QuantPolicy sq, fp8, int4;
  sq.smoothquant.on = true;
  fp8.fp8 = true;
  int4.int4.on = true;
  const std::vector<std::pair<QuantPolicy, std::string>> cases = {
      {sq, "--int8-mode 2"}, {fp8, "--fp8"}, {int4, "--weight-only-precision int4"}};
  for (const auto& [q, flag] : cases) {
    try {
      ModelWeights::load(dst, 0, 1, be, q);
      ADD_FAILURE() << "an INT8 folder loaded with " << flag;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("config.ini: weight_only_precision = int8"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  }
  const std::string scales = dst + "/" + int8_scales_name("model.layers.1.mlp.dense_4h_to_h") + ".0.bin";
  fs::resize_file(scales, fs::file_size(scales) - 4);
  try {
    ModelWeights::load(dst, 0, 1, be);
    ADD_FAILURE() << "a short scales file loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(scales), std::string::npos) << e.what();
  }
  const std::string values = dst + "/" + int8_values_name("model.layers.0.attention.dense") + ".0.bin";
  fs::remove(values);
  try {
    ModelWeights::check_files(dst, read_model_config(dst), 1);
    ADD_FAILURE() << "a missing INT8 file passed the check";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(values), std::string::npos) << e.what();
  }
  fs::remove_all(dst);
}

}  // namespace
}  // namespace ftx
