#pragma once
// The FP8 fixtures (scripts/fixtures/make_fp8_fixtures.py) for the CPU and CUDA FP8 engine tests.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "engine_test_util.h"

namespace ftx::test {

// $FTX_FIXTURES/fp8 (or a /tmp folder outside ctest), made on first use from the engine fixtures
// with this build's ftx, by the test venv's python (ml_dtypes).
inline std::string fp8_fixtures() {
  const std::string src = env_or("FTX_SOURCE_DIR", source_dir_from_here());
  const std::string engine = engine_fixtures();
  const char* f = std::getenv("FTX_FIXTURES");
  const std::string dir = f && *f ? std::string(f) + "/fp8" : engine + "-fp8";
  if (!std::ifstream(dir + "/DONE")) {
    const std::string cmd = env_or("FTX_TEST_PYTHON", "python3") + " " + src + "/scripts/fixtures/make_fp8_fixtures.py " +
                            dir + " " + env_or("FTX_BIN", FTX_TEST_BIN) + " " + engine + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "fixture script failed: " << cmd;
  }
  return dir;
}

}  // namespace ftx::test
