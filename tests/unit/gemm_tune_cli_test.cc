// `ftx gemm-tune` where there is no GPU (or no CUDA in the build): a clear error, a non-zero exit
// and no file; bad flags are reported before the GPU is looked for.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lib/gemm/gemm_config_file.h"
#include "lib/gemm/gemm_shapes.h"

#include "unit/gemm_tune_test_util.h"

using namespace ftx::gemm;

TEST(GemmTuneCli, FailsClearlyWithoutAGpu) {
  if (device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  if (!std::getenv("FTX_BIN")) GTEST_SKIP() << "FTX_BIN not set";
  std::string dir = temp_dir();
  FtxRun r = run_ftx(std::string(kTinyArgs) + " --data-type fp16 -o '" + dir + "/gemm_config.in'", dir);
  EXPECT_NE(r.rc, 0);
  EXPECT_TRUE(r.err.find("ftx: error: no CUDA device found (cudaGetDeviceCount") != std::string::npos ||
              r.err.find("ftx: error: ftx was built without CUDA; gemm-tune needs an NVIDIA GPU") != std::string::npos)
      << r.err;
  EXPECT_NE(access((dir + "/gemm_config.in").c_str(), F_OK), 0) << "no file may be written";
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(GemmTuneCli, RejectsBadFlagsBeforeLookingForAGpu) {
  if (!std::getenv("FTX_BIN")) GTEST_SKIP() << "FTX_BIN not set";
  std::string dir = temp_dir();
  // Sizes missing.
  FtxRun r = run_ftx("gemm-tune --batch-size 1 --beam-width 1 --max-input-len 8 --data-type fp16", dir);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--head-num"), std::string::npos) << r.err;
  // Unknown data type.
  r = run_ftx(std::string(kTinyArgs) + " --data-type int4", dir);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("int4"), std::string::npos) << r.err;
  std::system(("rm -rf '" + dir + "'").c_str());
}
