// NCCL is loaded at run time (kernels/cuda_backend/nccl_library.h), so a single-GPU run starts on a
// machine without libnccl.so.2: no ftx binary names it as a dependency; the loader finds this
// machine's (the CUDA toolkit's) and checks its major version; a missing library is an error that
// names every place tried. Needs no GPU: loading NCCL does not touch a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef FTX_HAVE_NCCL
#include "kernels/cuda_backend/nccl_library.h"
#endif
#include "formats/error.h"

namespace ftx {
namespace {

std::string output_of(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(NcclLibrary, NoBinaryLinksNccl) {
  if (std::system("command -v readelf > /dev/null 2>&1") != 0) GTEST_SKIP() << "no readelf (binutils) here";
  const std::string dynamic = output_of("readelf -d '" + std::string(std::getenv("FTX_BIN")) + "' 2>&1");
  ASSERT_NE(dynamic.find("(NEEDED)"), std::string::npos) << dynamic;  // readelf worked
  EXPECT_EQ(dynamic.find("libnccl"), std::string::npos) << dynamic;
}

#ifdef FTX_HAVE_NCCL
TEST(NcclLibrary, LoadsThisMachinesNcclAndChecksItsVersion) {
  if (output_of("ldconfig -p").find("libnccl.so.2") == std::string::npos && !std::getenv("FTX_NCCL_LIBRARY"))
    GTEST_SKIP() << "no libnccl.so.2 on this machine";
  const cuda::NcclLibrary& lib = cuda::nccl_library();
  EXPECT_NE(lib.path.find("libnccl.so"), std::string::npos) << lib.path;
  const int major = lib.version >= 10000 ? lib.version / 10000 : lib.version / 1000;
  EXPECT_EQ(major, NCCL_MAJOR) << lib.version;
  EXPECT_NE(lib.all_reduce, nullptr);
  EXPECT_STREQ(lib.get_error_string(ncclSuccess), "no error");
}

TEST(NcclLibrary, NoneFoundNamesEveryPlaceTried) {
  std::string msg;
  try {
    cuda::load_nccl_library({"/nonexistent/libnccl.so.2", "libm.so.6"});
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("/nonexistent/libnccl.so.2 ("), std::string::npos) << msg;
  EXPECT_NE(msg.find("libm.so.6 (no ncclGetUniqueId)"), std::string::npos) << msg;
}

TEST(NcclLibrary, CandidatesStartWithTheEnvironmentsChoice) {
  setenv("FTX_NCCL_LIBRARY", "/some/where/libnccl.so.2", 1);
  const auto c = cuda::nccl_library_candidates();
  unsetenv("FTX_NCCL_LIBRARY");
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0], "/some/where/libnccl.so.2");
  EXPECT_EQ(c[1], "libnccl.so.2");
}
#endif

}  // namespace
}  // namespace ftx
