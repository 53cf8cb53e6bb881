// Runtime lookup of gemm_config.in: where the file is found, refusal of another GPU's or data type's
// file (warning + heuristics), and the log of which GEMMs came from the file. No GPU needed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "formats/error.h"
#include "lib/gemm/gemm_algo_map.h"

using namespace ftx::gemm;

namespace {

DeviceIdentity gpu() {
  DeviceIdentity d;
  d.gpu_name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.cuda_version = 13000;
  d.cublaslt_version = 130100;
  return d;
}

struct TempTree {
  std::string root;
  TempTree() {
    char tmpl[] = "/tmp/ftx_gemm_map_XXXXXX";
    root = mkdtemp(tmpl);
    mkdir((root + "/model").c_str(), 0755);
    mkdir((root + "/cwd").c_str(), 0755);
  }
  ~TempTree() { std::system(("rm -rf '" + root + "'").c_str()); }
};

// One file with a classic row (algo `classic_algo`) and a cuBLASLt row, tuned on `dev` for `dtype`.
void write_file(const std::string& path, const DeviceIdentity& dev, GemmDType dtype, int classic_algo,
                int lt_workspace = 4096) {
  GemmConfigFile f;
  f.header.has_ftx_metadata = true;
  f.header.device = dev;
  f.header.dtype = gemm_dtype_name(dtype);
  GemmAlgoRow r;
  r.batch_beam = 1; r.seq_len = 1; r.head_num = 12; r.size_per_head = 64; r.dtype = static_cast<int>(dtype);
  r.batch_count = 1; r.n = 2304; r.m = 1; r.k = 768; r.algo_id = classic_algo; r.exec_time_ms = 0.01f;
  f.rows.push_back(r);
  r.n = 3072; r.algo_id = 21; r.custom_option = 0; r.tile = 18; r.splitk = 1; r.swizzle = 0;
  r.reduction_scheme = 0; r.workspace_size = lt_workspace; r.stages = 8;
  f.rows.push_back(r);
  write_gemm_config(path, f);
}

struct Log {
  std::vector<std::string> lines;
  GemmLog sink() { return [this](const std::string& s) { lines.push_back(s); }; }
  bool has(const std::string& needle) const {
    for (const auto& l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

}  // namespace

TEST(GemmAlgoMap, SearchOrderExplicitThenModelThenCwd) {
  TempTree t;
  const std::string m = t.root + "/model", c = t.root + "/cwd", x = t.root + "/explicit.in";
  EXPECT_EQ(locate_gemm_config("", m, c), "");
  write_file(c + "/gemm_config.in", gpu(), GemmDType::kFp16, 101);
  EXPECT_EQ(locate_gemm_config("", m, c), c + "/gemm_config.in");
  write_file(m + "/gemm_config.in", gpu(), GemmDType::kFp16, 102);
  EXPECT_EQ(locate_gemm_config("", m, c), m + "/gemm_config.in");
  write_file(x, gpu(), GemmDType::kFp16, 103);
  EXPECT_EQ(locate_gemm_config(x, m, c), x);
  EXPECT_THROW(locate_gemm_config(t.root + "/missing.in", m, c), ftx::Error);

  Log log;
  auto map = GemmAlgoMap::load("", m, gpu(), GemmDType::kFp16, log.sink(), c);
  ASSERT_TRUE(map.active());
  EXPECT_EQ(map.path(), m + "/gemm_config.in");
  ASSERT_NE(map.find(1, 1, 2304, 768, "decoder QKV"), nullptr);
  EXPECT_EQ(map.find(1, 1, 2304, 768, "decoder QKV")->algo_id, 102);
  auto explicit_map = GemmAlgoMap::load(x, m, gpu(), GemmDType::kFp16, log.sink(), c);
  EXPECT_EQ(explicit_map.find(1, 1, 2304, 768, "decoder QKV")->algo_id, 103);
}

TEST(GemmAlgoMap, LogsWhichGemmsCameFromTheFileOnce) {
  TempTree t;
  write_file(t.root + "/model/gemm_config.in", gpu(), GemmDType::kFp16, 104);
  Log log;
  auto map = GemmAlgoMap::load("", t.root + "/model", gpu(), GemmDType::kFp16, log.sink(), t.root + "/cwd");
  EXPECT_TRUE(log.has("using tuned GEMMs from " + t.root + "/model/gemm_config.in (2 rows"));
  size_t before = log.lines.size();
  const GemmAlgoRow* qkv = map.find(1, 1, 2304, 768, "decoder QKV");
  ASSERT_NE(qkv, nullptr);
  EXPECT_FALSE(qkv->is_cublaslt());
  const GemmAlgoRow* ffn = map.find(1, 1, 3072, 768, "decoder ffn 1");
  ASSERT_NE(ffn, nullptr);
  EXPECT_TRUE(ffn->is_cublaslt());
  EXPECT_EQ(ffn->tile, 18);
  map.find(1, 1, 2304, 768, "decoder QKV");                  // second use: no new line
  EXPECT_EQ(map.find(1, 2, 2304, 768, "decoder QKV"), nullptr);  // batch 2 not tuned: heuristics
  ASSERT_EQ(log.lines.size(), before + 2);
  EXPECT_TRUE(log.has("gemm decoder QKV [batchCount=1 M=1 N=2304 K=768]: cuBLAS algo 104 from"));
  EXPECT_TRUE(log.has("gemm decoder ffn 1 [batchCount=1 M=1 N=3072 K=768]: cuBLASLt algo 21 from"));
  EXPECT_EQ(map.hits(), 2u);
}

TEST(GemmAlgoMap, RefusesAnotherGpuTypeWithAWarning) {
  TempTree t;
  DeviceIdentity a100 = gpu();
  a100.gpu_name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8;
  write_file(t.root + "/model/gemm_config.in", a100, GemmDType::kFp16, 104);
  Log log;
  auto map = GemmAlgoMap::load("", t.root + "/model", gpu(), GemmDType::kFp16, log.sink(), t.root + "/cwd");
  EXPECT_FALSE(map.active());
  EXPECT_NE(map.rejection().find("NVIDIA A100-SXM4-80GB"), std::string::npos);
  EXPECT_TRUE(log.has("warning: ignoring " + t.root + "/model/gemm_config.in: it was tuned on 'NVIDIA A100"));
  EXPECT_TRUE(log.has("using cuBLASLt heuristics"));
  EXPECT_EQ(map.find(1, 1, 2304, 768, "decoder QKV"), nullptr);
}

TEST(GemmAlgoMap, RefusesAnotherDataType) {
  TempTree t;
  write_file(t.root + "/cwd/gemm_config.in", gpu(), GemmDType::kFp16, 104);
  Log log;
  auto map = GemmAlgoMap::load("", t.root + "/model", gpu(), GemmDType::kBf16, log.sink(), t.root + "/cwd");
  EXPECT_FALSE(map.active());
  EXPECT_TRUE(log.has("tuned for fp16, this run uses bf16"));
  EXPECT_EQ(map.find(1, 1, 2304, 768, "decoder QKV"), nullptr);
}

TEST(GemmAlgoMap, MissingFileMeansHeuristicsAndMalformedFileIsAnError) {
  TempTree t;
  Log log;
  auto map = GemmAlgoMap::load("", t.root + "/model", gpu(), GemmDType::kFp16, log.sink(), t.root + "/cwd");
  EXPECT_FALSE(map.active());
  EXPECT_EQ(map.path(), "");
  EXPECT_TRUE(log.has("no gemm_config.in found"));

  std::ofstream(t.root + "/cwd/gemm_config.in") << "batch_size, seq_len\n1 2 3\n";
  try {
    GemmAlgoMap::load("", "", gpu(), GemmDType::kFp16, log.sink(), t.root + "/cwd");
    FAIL() << "malformed file accepted";
  } catch (const ftx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_config.in: line 2:"), std::string::npos) << e.what();
  }
}

TEST(GemmAlgoMap, RowsNeedingMoreThan32MiBWorkspaceAreTreatedAsAbsent) {
  TempTree t;
  write_file(t.root + "/cwd/gemm_config.in", gpu(), GemmDType::kFp16, 104, (32 << 20) + 1);
  Log log;
  auto map = GemmAlgoMap::load("", "", gpu(), GemmDType::kFp16, log.sink(), t.root + "/cwd");
  EXPECT_TRUE(map.active());
  EXPECT_EQ(map.find(1, 1, 3072, 768, "decoder ffn 1"), nullptr);
  EXPECT_NE(map.find(1, 1, 2304, 768, "decoder QKV"), nullptr);
}

namespace {

// A classic row with algo -1 (CUBLAS_GEMM_DEFAULT, what FT's fp32 gpt_gemm and `ftx gemm-tune`
// write when the default wins) is a classic cublasGemmEx call with algo -1, like every other classic
// row; a cuBLASLt row (stages set) is rebuilt for cuBLASLt. The CUDA backend runs what this says
// (GPU side: cuda_backend_test GemmFromTunedFile).
TEST(GemmAlgoMap, ClassicRowsIncludingAlgoMinusOneRunThroughCublasGemmEx) {
  GemmAlgoRow classic_default;
  classic_default.algo_id = -1;
  const TunedGemmRoute d = tuned_gemm_route(classic_default);
  EXPECT_TRUE(d.classic);
  EXPECT_EQ(d.classic_algo, -1);

  GemmAlgoRow classic_23;
  classic_23.algo_id = 23;
  EXPECT_TRUE(tuned_gemm_route(classic_23).classic);
  EXPECT_EQ(tuned_gemm_route(classic_23).classic_algo, 23);

  // Parsed from a file line as FT writes it: "-1" in the algoId column and every Lt column.
  const GemmConfigFile f = parse_gemm_config(
      std::string(kFtGemmConfigHeader) + "\n1 1 16 64 0 ### 1 3072 1 1024 -1 -1 -1 -1 -1 -1 -1 -1 0.012\n", "test");
  ASSERT_EQ(f.rows.size(), 1u);
  EXPECT_TRUE(tuned_gemm_route(f.rows[0]).classic);
  EXPECT_EQ(tuned_gemm_route(f.rows[0]).classic_algo, -1);

  GemmAlgoRow lt;
  lt.algo_id = 6;
  lt.tile = 20;
  lt.stages = 8;
  lt.custom_option = lt.splitk = lt.swizzle = lt.reduction_scheme = lt.workspace_size = 0;
  EXPECT_FALSE(tuned_gemm_route(lt).classic);
}

}  // namespace
