// gemm_config.in: FT-compatible writing, strict parsing, lookup and the GPU/dtype refusal rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "formats/error.h"
#include "lib/gemm/gemm_config_file.h"
#include "lib/gemm/gemm_tune.h"

using namespace ftx::gemm;

namespace {

DeviceIdentity h100() {
  DeviceIdentity d;
  d.gpu_name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.cuda_version = 13000;
  d.cublaslt_version = 130100;
  return d;
}

GemmModelDims doc_dims() {
  GemmModelDims d;
  d.head_num = 12;
  d.size_per_head = 128;
  d.inter_size = 6144;
  d.vocab_size = 51200;
  return d;
}

// A file as gemm-tune would write it for B=2: classic rows for 1, 2, 10, cuBLASLt rows elsewhere.
GemmConfigFile sample_file() {
  GemmConfigFile f;
  f.header.has_ftx_metadata = true;
  f.header.device = h100();
  f.header.dtype = "fp16";
  GemmWorkload w;
  w.batch_size = 2;
  w.max_input_len = 32;
  int i = 0;
  for (const auto& s : gpt_gemm_shapes_all_batches(doc_dims(), w)) {
    GemmAlgoRow r = gemm_row_key(s, doc_dims(), GemmDType::kFp16);
    if (gemm_uses_cublaslt_search(s, GemmDType::kFp16)) {
      r.algo_id = 21 + i % 5;
      r.custom_option = i % 3;
      r.tile = 15 + i % 7;
      r.splitk = 1 + i % 4;
      r.swizzle = i % 2;
      r.reduction_scheme = i % 4 == 0 ? 0 : 2;
      r.workspace_size = (i % 3) * 4096;
      r.stages = 8 + i % 6;
    } else {
      r.algo_id = 99 + i % 17;
    }
    r.exec_time_ms = 0.015625f * (i + 1);  // exact in binary and in %f
    f.rows.push_back(r);
    ++i;
  }
  return f;
}

void expect_same_row(const GemmAlgoRow& a, const GemmAlgoRow& b) {
  EXPECT_EQ(format_gemm_row(a), format_gemm_row(b));
  EXPECT_EQ(a.exec_time_ms, b.exec_time_ms);
}

std::string temp_dir() {
  char tmpl[] = "/tmp/ftx_gemm_cfg_XXXXXX";
  char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d ? d : "/tmp";
}

std::string error_of(const std::string& text) {
  try {
    parse_gemm_config(text, "cfg.in");
  } catch (const ftx::Error& e) {
    return e.what();
  }
  return "";
}

const std::string kGoodRow = "8 32 12 128 1 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 0.125000";

}  // namespace

TEST(GemmConfigFile, RowIsFtPrintfLayout) {
  GemmAlgoRow r;
  r.batch_beam = 8;
  r.seq_len = 32;
  r.head_num = 12;
  r.size_per_head = 128;
  r.dtype = 1;
  r.batch_count = 1;
  r.n = 4608;
  r.m = 256;
  r.k = 1536;
  r.algo_id = 99;
  r.exec_time_ms = 0.125f;
  EXPECT_EQ(format_gemm_row(r), kGoodRow);
  r.algo_id = 21; r.custom_option = 0; r.tile = 20; r.splitk = 1; r.swizzle = 1; r.reduction_scheme = 0;
  r.workspace_size = 0; r.stages = 11;
  EXPECT_EQ(format_gemm_row(r), "8 32 12 128 1 ### 1 4608 256 1536 21 0 20 1 1 0 0 11 0.125000");
}

TEST(GemmConfigFile, HeaderIsFtHeaderPlusFtxMetadata) {
  GemmFileHeader h;
  h.has_ftx_metadata = true;
  h.device = h100();
  h.dtype = "bf16";
  std::string line = format_gemm_header(h);
  EXPECT_EQ(line.rfind(kFtGemmConfigHeader, 0), 0u) << "FT's header text must come first";
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_LT(line.size(), 1023u);  // FT's fgets(tmp, 1024, fd) must swallow the whole line
  EXPECT_EQ(line.substr(std::strlen(kFtGemmConfigHeader)),
            " ### ftx v1 gpu=\"NVIDIA H100 80GB HBM3\" cc=9.0 cuda=13000 cublaslt=130100 dtype=bf16 int8_mode=0");
  GemmFileHeader back = parse_gemm_config(line + "\n", "x").header;
  EXPECT_TRUE(back.has_ftx_metadata);
  EXPECT_EQ(back.device.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(back.device.cc_major, 9);
  EXPECT_EQ(back.device.cc_minor, 0);
  EXPECT_EQ(back.device.cuda_version, 13000);
  EXPECT_EQ(back.device.cublaslt_version, 130100);
  EXPECT_EQ(back.dtype, "bf16");
  // Without metadata the header is FT's, byte for byte.
  EXPECT_EQ(format_gemm_header(GemmFileHeader{}), kFtGemmConfigHeader);
  // Quotes and control characters in a GPU name cannot break the line.
  h.device.gpu_name = "Bad\"GPU\nname";
  line = format_gemm_header(h);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(parse_gemm_config(line, "x").header.device.gpu_name, "Bad_GPU_name");
}

TEST(GemmConfigFile, WriteParseLookupRoundTrip) {
  const GemmConfigFile f = sample_file();
  ASSERT_EQ(f.rows.size(), 22u);
  const std::string dir = temp_dir();
  const std::string path = dir + "/gemm_config.in";
  write_gemm_config(path, f);
  GemmConfigFile back = read_gemm_config(path);
  EXPECT_EQ(back.header.device.gpu_name, f.header.device.gpu_name);
  EXPECT_EQ(back.header.dtype, "fp16");
  ASSERT_EQ(back.rows.size(), f.rows.size());
  for (size_t i = 0; i < f.rows.size(); ++i) expect_same_row(back.rows[i], f.rows[i]);
  EXPECT_EQ(gemm_config_to_string(back), gemm_config_to_string(f));

  GemmAlgoTable table(back.rows);
  GemmWorkload w;
  w.batch_size = 2;
  w.max_input_len = 32;
  auto shapes = gpt_gemm_shapes_all_batches(doc_dims(), w);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    const GemmAlgoRow* r = table.find(s.batch_count, s.m, s.n, s.k, 1);
    ASSERT_NE(r, nullptr) << "GEMM " << s.id;
    // Where two shapes share a key, the first row wins.
    size_t first = i;
    for (size_t j = 0; j < i; ++j)
      if (shapes[j].batch_count == s.batch_count && shapes[j].m == s.m && shapes[j].n == s.n && shapes[j].k == s.k)
        first = std::min(first, j);
    expect_same_row(*r, f.rows[first]);
  }
  // Key order is (batchCount, M, N, K, dtype): swapping M and N, or another dtype, misses.
  EXPECT_EQ(table.find(1, 4608, 64, 1536, 1), nullptr);
  EXPECT_NE(table.find(1, 64, 4608, 1536, 1), nullptr);
  EXPECT_EQ(table.find(1, 64, 4608, 1536, 0), nullptr);
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

// What FT's cublasAlgoMap::loadGemmConfig does: fgets the header, fscanf rows with the base format.
TEST(GemmConfigFile, FtsOwnParserReadsWhatWeWrite) {
  const GemmConfigFile f = sample_file();
  const std::string dir = temp_dir();
  const std::string path = dir + "/gemm_config.in";
  write_gemm_config(path, f);
  FILE* fd = std::fopen(path.c_str(), "r");
  ASSERT_NE(fd, nullptr);
  char tmp[1024];
  ASSERT_NE(std::fgets(tmp, 1024, fd), nullptr);
  ASSERT_EQ(tmp[std::strlen(tmp) - 1], '\n') << "header longer than FT's fgets buffer";
  int v[17];
  float t;
  size_t n = 0;
  while (std::fscanf(fd, "%d %d %d %d %d ### %d %d %d %d %d %d %d %d %d %d %d %d %f\n", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &v[14], &v[15], &v[16],
                     &t) == 18) {
    ASSERT_LT(n, f.rows.size());
    const GemmAlgoRow& r = f.rows[n];
    EXPECT_EQ(v[5], r.batch_count);
    EXPECT_EQ(v[6], r.n);
    EXPECT_EQ(v[7], r.m);
    EXPECT_EQ(v[8], r.k);
    EXPECT_EQ(v[9], r.algo_id);
    EXPECT_EQ(v[16], r.stages);
    EXPECT_EQ(t, r.exec_time_ms);
    ++n;
  }
  EXPECT_TRUE(std::feof(fd));
  EXPECT_EQ(n, f.rows.size());
  std::fclose(fd);
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(GemmConfigFile, FirstDuplicateWins) {
  std::string text = std::string(kFtGemmConfigHeader) + "\n" + kGoodRow + "\n" +
                     "8 32 12 128 1 ### 1 4608 256 1536 105 -1 -1 -1 -1 -1 -1 -1 0.010000\n" +
                     "8 32 12 128 0 ### 1 4608 256 1536 7 -1 -1 -1 -1 -1 -1 -1 0.500000\n";
  auto f = parse_gemm_config(text, "x");
  ASSERT_EQ(f.rows.size(), 3u);
  GemmAlgoTable t(f.rows);
  ASSERT_NE(t.find(1, 256, 4608, 1536, 1), nullptr);
  EXPECT_EQ(t.find(1, 256, 4608, 1536, 1)->algo_id, 99);  // not the later, faster 105
  EXPECT_EQ(t.find(1, 256, 4608, 1536, 0)->algo_id, 7);   // dtype is part of the key
  EXPECT_EQ(t.size(), 2u);
}

TEST(GemmConfigFile, FtFileWithoutMetadataParses) {
  std::string text = std::string(kFtGemmConfigHeader) + "\n" + kGoodRow + "\n\n";
  auto f = parse_gemm_config(text, "x");
  EXPECT_FALSE(f.header.has_ftx_metadata);
  EXPECT_EQ(f.rows.size(), 1u);
}

TEST(GemmConfigFile, MalformedLinesAreErrorsWithLineNumbers) {
  const std::string h = std::string(kFtGemmConfigHeader) + "\n";
  struct Case { std::string text, want; };
  const Case cases[] = {
      {h + kGoodRow + "\n8 32 12 128 1 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 0.1\n", "line 3: expected"},
      {h + "8 32 12 128 1 ## 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 0.1\n", "line 2: expected"},
      {h + "8 32 12 128 1 ### 1 4608 256 1536 x9 -1 -1 -1 -1 -1 -1 -1 0.1\n", "line 2: field 11 'x9'"},
      {h + "8 32 12 128 1.5 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 0.1\n", "line 2: field 5"},
      {h + "8 32 12 128 7 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 0.1\n", "line 2: unknown dataType 7"},
      {h + "8 32 12 128 1 ### 1 4608 -256 1536 99 -1 -1 -1 -1 -1 -1 -1 0.1\n", "line 2: batchCount, N, M and K"},
      {h + "8 32 12 128 1 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 nan\n", "line 2: exec_time 'nan'"},
      {h + "8 32 12 128 1 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 -0.5\n", "line 2: exec_time"},
      {h + "8 32 12 128 1 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 99999999999\n", ""},  // large but finite: ok
      {h + "8 32 12 128 1 ### 1 4608 256 1536 99 -1 -1 -1 -1 -1 -1 -1 99999999999999999999999999999999999999999\n",
       "line 2: exec_time"},
      {h + "8 32 12 128 1 ### 1 4608 256 9999999999 99 -1 -1 -1 -1 -1 -1 -1 0.1\n", "line 2: field 10"},
      // FT's cuBLAS 11.11 layout (two extra shape-id columns) is not this build's layout.
      {h + "8 32 12 128 1 ### 1 4608 256 1536 21 0 20 1 1 0 0 11 3 1 0.1\n", "line 2: expected"},
      {kGoodRow + "\n", "line 1: not a gemm_config.in header"},
      {"", "empty gemm_config.in"},
      {std::string(kFtGemmConfigHeader) + " ### ftx v1 gpu=\"H100 cc=9.0 dtype=fp16\n", "line 1: ftx metadata"},
      {std::string(kFtGemmConfigHeader) + " ### ftx v1 gpu=\"H100\" cc=nine dtype=fp16\n", "line 1: ftx metadata"},
      {std::string(kFtGemmConfigHeader) + " ### ftx v1 gpu=\"H100\" dtype=fp16\n", "needs gpu=, cc= and dtype="},
      {std::string(kFtGemmConfigHeader) + " ### ftx v1 gpu=\"H100\" cc=9.0 dtype=int4\n", "int4"},
      {std::string(kFtGemmConfigHeader) + std::string(2000, ' ') + "\n", "line 1: header is"},
  };
  for (const auto& c : cases) {
    std::string err = error_of(c.text);
    if (c.want.empty()) {
      EXPECT_EQ(err, "") << c.text;
    } else {
      EXPECT_NE(err.find(c.want), std::string::npos) << "got: " << err << "\nfor: " << c.text;
      EXPECT_EQ(err.rfind("cfg.in: ", 0), 0u) << err;
    }
  }
  EXPECT_THROW(read_gemm_config("/nonexistent/gemm_config.in"), ftx::Error);
}

TEST(GemmConfigFile, RefusesFilesFromAnotherGpuOrDtype) {
  GemmFileHeader h;
  h.has_ftx_metadata = true;
  h.device = h100();
  h.dtype = "fp16";
  EXPECT_EQ(gemm_file_rejection_reason(h, h100(), GemmDType::kFp16), "");

  DeviceIdentity a100 = h100();
  a100.gpu_name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8;
  std::string why = gemm_file_rejection_reason(h, a100, GemmDType::kFp16);
  EXPECT_NE(why.find("tuned on 'NVIDIA H100 80GB HBM3'"), std::string::npos) << why;
  EXPECT_NE(why.find("NVIDIA A100-SXM4-80GB"), std::string::npos) << why;

  DeviceIdentity same_name_other_cc = h100();
  same_name_other_cc.cc_minor = 1;
  why = gemm_file_rejection_reason(h, same_name_other_cc, GemmDType::kFp16);
  EXPECT_NE(why.find("compute capability 9.0, this GPU is 9.1"), std::string::npos) << why;

  why = gemm_file_rejection_reason(h, h100(), GemmDType::kBf16);
  EXPECT_NE(why.find("tuned for fp16, this run uses bf16"), std::string::npos) << why;

  why = gemm_file_rejection_reason(GemmFileHeader{}, h100(), GemmDType::kFp16);
  EXPECT_NE(why.find("no ftx header"), std::string::npos) << why;

  // A newer cuBLASLt is a note, not a refusal.
  DeviceIdentity newer = h100();
  newer.cublaslt_version = 130200;
  EXPECT_EQ(gemm_file_rejection_reason(h, newer, GemmDType::kFp16), "");
  EXPECT_NE(gemm_version_note(h, newer).find("130200"), std::string::npos);
  EXPECT_EQ(gemm_version_note(h, h100()), "");
}

TEST(GemmConfigFile, CublasltSearchFollowsFtRules) {
  auto shapes = gpt_gemm_shapes(doc_dims(), 1, 32);
  for (const auto& s : shapes) {
    bool lt = s.id != 1 && s.id != 2 && s.id != 10;
    EXPECT_EQ(gemm_uses_cublaslt_search(s, GemmDType::kFp16), lt) << s.id;
    EXPECT_EQ(gemm_uses_cublaslt_search(s, GemmDType::kBf16), lt) << s.id;
    EXPECT_FALSE(gemm_uses_cublaslt_search(s, GemmDType::kFp32)) << s.id;
  }
  GemmAlgoRow r = gemm_row_key(shapes[1], doc_dims(), GemmDType::kBf16);
  EXPECT_EQ(format_gemm_row(r), "1 32 12 128 2 ### 12 32 32 128 0 -1 -1 -1 -1 -1 -1 -1 0.000000");
  r = gemm_row_key(shapes[7], doc_dims(), GemmDType::kFp32);
  EXPECT_EQ(format_gemm_row(r), "1 1 12 128 0 ### 1 1536 1 1536 0 -1 -1 -1 -1 -1 -1 -1 0.000000");
}
