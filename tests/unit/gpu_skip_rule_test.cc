// The rule that decides whether a GPU test runs, skips or fails (tests/unit/gpu_test_util.h), on
// the CPU: only a machine without a GPU skips; a driver problem fails; FTX_REQUIRE_GPU=1 turns
// every absence into a failure.
#include <gtest/gtest.h>

#include "gpu_test_util.h"

namespace ftx::test {
namespace {

GpuProbe built_with(bool call_ok, int count) {
  GpuProbe p;
  p.cuda_built = true;
  p.call_ok = call_ok;
  p.device_count = count;
  return p;
}

TEST(GpuSkipRule, RunsWhenADeviceAnswers) {
  EXPECT_EQ(gpu_test_decision(built_with(true, 1)).action, GpuAction::kRun);
  GpuProbe required = built_with(true, 2);
  required.required = true;
  EXPECT_EQ(gpu_test_decision(required).action, GpuAction::kRun);
}

TEST(GpuSkipRule, SkipsOnlyWhereThereIsNoGpu) {
  GpuProbe no_cuda;  // built without CUDA
  EXPECT_EQ(gpu_test_decision(no_cuda).action, GpuAction::kSkip);
  EXPECT_EQ(gpu_test_decision(built_with(true, 0)).action, GpuAction::kSkip);

  GpuProbe no_device = built_with(false, 0);
  no_device.no_device_error = true;
  no_device.error = "cudaErrorNoDevice: no CUDA-capable device is detected";
  const GpuDecision d = gpu_test_decision(no_device);
  EXPECT_EQ(d.action, GpuAction::kSkip);
  EXPECT_NE(d.why.find("cudaErrorNoDevice"), std::string::npos) << d.why;

  // No NVIDIA driver installed at all: the runtime says "insufficient driver".
  GpuProbe no_driver = built_with(false, 0);
  no_driver.insufficient_driver = true;
  no_driver.driver_library = false;
  no_driver.error = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version";
  EXPECT_EQ(gpu_test_decision(no_driver).action, GpuAction::kSkip);
}

TEST(GpuSkipRule, FailsOnADriverProblem) {
  // A driver that is installed but too old for the runtime.
  GpuProbe old_driver = built_with(false, 0);
  old_driver.insufficient_driver = true;
  old_driver.driver_library = true;
  old_driver.error = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version";
  const GpuDecision d = gpu_test_decision(old_driver);
  EXPECT_EQ(d.action, GpuAction::kFail);
  EXPECT_NE(d.why.find("cudaErrorInsufficientDriver"), std::string::npos) << d.why;

  GpuProbe other = built_with(false, 0);
  other.error = "cudaErrorInitializationError: initialization error";
  EXPECT_EQ(gpu_test_decision(other).action, GpuAction::kFail);
}

TEST(GpuSkipRule, RequireGpuTurnsEveryAbsenceIntoAFailure) {
  GpuProbe no_cuda;
  no_cuda.required = true;
  GpuProbe zero = built_with(true, 0);
  zero.required = true;
  GpuProbe no_device = built_with(false, 0);
  no_device.no_device_error = true;
  no_device.required = true;
  for (const GpuProbe& p : {no_cuda, zero, no_device}) {
    const GpuDecision d = gpu_test_decision(p);
    EXPECT_EQ(d.action, GpuAction::kFail);
    EXPECT_NE(d.why.find("FTX_REQUIRE_GPU=1"), std::string::npos) << d.why;
  }
}

// The probe of this machine agrees with the rule (whatever the machine has).
TEST(GpuSkipRule, ThisMachineIsProbed) {
  const GpuProbe p = probe_this_machine();
#ifdef FTX_HAVE_CUDA
  EXPECT_TRUE(p.cuda_built);
  if (!p.call_ok) EXPECT_FALSE(p.error.empty());
#else
  EXPECT_FALSE(p.cuda_built);
#endif
  EXPECT_EQ(have_cuda_device(), gpu_test_decision(p).action == GpuAction::kRun);
}

}  // namespace
}  // namespace ftx::test
