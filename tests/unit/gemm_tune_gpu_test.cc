// `ftx gemm-tune` end to end on a GPU (ctest label gpu, from the _gpu_test name); skipped cleanly
// (GTEST_SKIP) on a machine without a GPU or a build without CUDA, failed on other CUDA errors
// (gpu_test_util.h).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lib/gemm/gemm_config_file.h"
#include "lib/gemm/gemm_shapes.h"

#include "unit/gemm_tune_test_util.h"
#include "unit/gpu_test_util.h"

using namespace ftx::gemm;

TEST(GemmTuneGpu, TinyConfigWritesAParsableFileWith11RowsPerBatchSize) {
  REQUIRE_CUDA_DEVICE();
  if (!std::getenv("FTX_BIN")) GTEST_SKIP() << "FTX_BIN not set";
  for (const char* dtype : {"fp16", "fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    std::string dir = temp_dir();
    std::string out = dir + "/gemm_config.in";
    FtxRun r = run_ftx(std::string(kTinyArgs) + " --data-type " + dtype + " -o '" + out + "'", dir);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("[22/22]"), std::string::npos) << "progress on stderr: " << r.err;
    GemmConfigFile f = read_gemm_config(out);
    ASSERT_EQ(f.rows.size(), 22u);
    EXPECT_TRUE(f.header.has_ftx_metadata);
    EXPECT_EQ(f.header.dtype, dtype);
#ifdef FTX_HAVE_CUDA
    const DeviceIdentity id = ftx::cuda::device_identity(ftx::cuda::current_cuda_device());
    EXPECT_EQ(gemm_file_rejection_reason(f.header, id, gemm_dtype_from_name(dtype)), "");
#endif
    GemmModelDims d;
    d.head_num = 4;
    d.size_per_head = 32;
    d.inter_size = 512;
    d.vocab_size = 1000;
    GemmWorkload w;
    w.batch_size = 2;
    w.max_input_len = 8;
    auto shapes = gpt_gemm_shapes_all_batches(d, w);
    for (size_t i = 0; i < shapes.size(); ++i) {
      const GemmAlgoRow& row = f.rows[i];
      EXPECT_EQ(row.m, shapes[i].m);
      EXPECT_EQ(row.n, shapes[i].n);
      EXPECT_EQ(row.k, shapes[i].k);
      EXPECT_EQ(row.batch_count, shapes[i].batch_count);
      EXPECT_GT(row.exec_time_ms, 0.0f);
      EXPECT_LT(row.exec_time_ms, 100.0f);
      bool lt_allowed = std::string(dtype) != "fp32" && shapes[i].id != 1 && shapes[i].id != 2 && shapes[i].id != 10;
      if (!lt_allowed) {
        EXPECT_FALSE(row.is_cublaslt()) << "GEMM " << shapes[i].id;
      }
      if (row.is_cublaslt()) {
        EXPECT_LE(row.workspace_size, 32 << 20);
      }
    }
    // --quiet: nothing on stderr (--force: the file above is there).
    r = run_ftx(std::string(kTinyArgs) + " --data-type " + dtype + " --quiet --force -o '" + out + "'", dir);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    std::system(("rm -rf '" + dir + "'").c_str());
  }
}
