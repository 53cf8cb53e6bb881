// Gives every unit-test executable the environment the e2e tests get from ctest (FTX_BIN,
// FTX_FIXTURES, ...), also when the executable is run by hand. Values already set win. (Passing
// them through gtest_discover_tests' ENVIRONMENT property does not work: it splits the list.)
#include <cstdlib>

namespace {
const bool kTestEnvSet = [] {
  setenv("FTX_BIN", FTX_TEST_BIN, 0);
  setenv("FTX_FIXTURES", FTX_TEST_FIXTURES, 0);
  setenv("FTX_SOURCE_DIR", FTX_TEST_SOURCE_DIR, 0);
  setenv("FTX_TORCH_PYTHON", FTX_TEST_TORCH_PYTHON, 0);
  setenv("FTX_TEST_PYTHON", FTX_TEST_VENV_PYTHON, 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  return true;
}();
}  // namespace
