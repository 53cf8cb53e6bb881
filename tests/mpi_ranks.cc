// The ctest entries that run a gtest binary under `mpirun -np N` (tests/e2e/<subject>/*.cmake, through
// ftx_mpirun in tests/CMakeLists.txt) set FTX_TEST_RANKS=N. Each multi-rank case skips itself
// when the process does not look launched by MPI (so that plain ctest discovery can run the same
// binary), and a filter can match nothing: either way such an entry would pass having checked
// nothing. With FTX_TEST_RANKS set, this binary fails unless MPI launched it on exactly N ranks
// and at least one case ran to a pass (not skipped). Without it, nothing changes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "lib/dist/communicator.h"

namespace {

class RanksCheck : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!want_) return;
    ASSERT_TRUE(ftx::dist::launched_by_mpi())
        << "FTX_TEST_RANKS=" << want_ << ": this process does not see the MPI launch it was run under "
        << "(dist::launched_by_mpi() found none of its variables), so every multi-rank case would skip";
    const int size = ftx::dist::make_communicator()->size();
    ASSERT_EQ(size, std::atoi(want_)) << "FTX_TEST_RANKS=" << want_ << ": the MPI world has " << size << " ranks";
  }
  void TearDown() override {
    if (!want_) return;
    const auto* u = ::testing::UnitTest::GetInstance();
    EXPECT_GT(u->successful_test_count(), 0)
        << "FTX_TEST_RANKS=" << want_ << ": no case ran to a pass on " << want_ << " ranks (" << u->skipped_test_count()
        << " skipped, " << u->failed_test_count() << " failed of " << u->test_to_run_count() << " selected)";
  }

 private:
  const char* want_ = std::getenv("FTX_TEST_RANKS");
};

const auto* const kRanksCheck = ::testing::AddGlobalTestEnvironment(new RanksCheck);

}  // namespace
