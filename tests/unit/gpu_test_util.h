#pragma once
// When a GPU test runs, skips or fails (label `gpu`). Skipping is for machines that have no GPU;
// anything else that keeps the tests from a GPU is a failure, so a broken driver cannot pass as
// "all GPU tests skipped":
//   * a device answers                                   -> run
//   * FTX_REQUIRE_GPU=1 (scripts/gpu-run sets it)        -> fail without a usable device
//   * built without CUDA                                 -> skip
//   * cudaGetDeviceCount: 0 devices or cudaErrorNoDevice -> skip
//   * cudaErrorInsufficientDriver and no NVIDIA driver library (libcuda.so.1) on the machine at
//     all: the CUDA runtime reports a missing driver this way, so it is a machine without a
//     GPU                                                -> skip
//   * any other error (an old driver, a broken install)  -> fail, naming the error
// gpu_test_decision() is the rule alone (unit-tested on the CPU in gpu_skip_rule_test);
// REQUIRE_CUDA_DEVICE() probes this machine and applies it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#ifdef FTX_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace ftx::test {

struct GpuProbe {
  bool cuda_built = false;
  bool call_ok = false;            // cudaGetDeviceCount returned cudaSuccess
  int device_count = 0;            // when call_ok
  bool no_device_error = false;    // the error was cudaErrorNoDevice
  bool insufficient_driver = false;  // the error was cudaErrorInsufficientDriver
  bool driver_library = true;      // libcuda.so.1 can be loaded
  std::string error;               // cudaGetErrorName: cudaGetErrorString, when !call_ok
  bool required = false;           // FTX_REQUIRE_GPU=1
};

enum class GpuAction { kRun, kSkip, kFail };

struct GpuDecision {
  GpuAction action = GpuAction::kSkip;
  std::string why;  // for the skip or failure message
};

inline GpuDecision gpu_test_decision(const GpuProbe& p) {
  if (p.cuda_built && p.call_ok && p.device_count > 0) return {GpuAction::kRun, ""};
  std::string absent;
  bool skippable = true;
  if (!p.cuda_built) {
    absent = "ftx was built without CUDA";
  } else if (p.call_ok) {
    absent = "no CUDA device (cudaGetDeviceCount: 0 devices)";
  } else if (p.no_device_error) {
    absent = "no CUDA device (cudaGetDeviceCount: " + p.error + ")";
  } else if (p.insufficient_driver && !p.driver_library) {
    absent = "no NVIDIA driver on this machine (cudaGetDeviceCount: " + p.error + ", libcuda.so.1 not found)";
  } else {
    absent = "cudaGetDeviceCount failed: " + p.error +
             " (a driver or installation problem, not a machine without a GPU)";
    skippable = false;
  }
  if (p.required) return {GpuAction::kFail, "FTX_REQUIRE_GPU=1, but " + absent};
  return {skippable ? GpuAction::kSkip : GpuAction::kFail, absent};
}

// This machine's probe (cudaGetDeviceCount once per process).
inline GpuProbe probe_this_machine() {
  GpuProbe p;
  const char* req = std::getenv("FTX_REQUIRE_GPU");
  p.required = req && std::string(req) == "1";
#ifdef FTX_HAVE_CUDA
  p.cuda_built = true;
  static const GpuProbe cached = [] {
    GpuProbe q;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    q.call_ok = e == cudaSuccess;
    q.device_count = q.call_ok ? n : 0;
    q.no_device_error = e == cudaErrorNoDevice;
    q.insufficient_driver = e == cudaErrorInsufficientDriver;
    if (!q.call_ok) {
      q.error = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
      cudaGetLastError();
      if (void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
        dlclose(h);
      } else {
        q.driver_library = false;
      }
    }
    return q;
  }();
  p.call_ok = cached.call_ok;
  p.device_count = cached.device_count;
  p.no_device_error = cached.no_device_error;
  p.insufficient_driver = cached.insufficient_driver;
  p.driver_library = cached.driver_library;
  p.error = cached.error;
#endif
  return p;
}

// True when a device answers (tests that run only where there is none use this to skip).
inline bool have_cuda_device() { return gpu_test_decision(probe_this_machine()).action == GpuAction::kRun; }

}  // namespace ftx::test

// In a test body or SetUp: run, skip or fail by the rule above.
#define REQUIRE_CUDA_DEVICE()                                                            \
  do {                                                                                   \
    const ::ftx::test::GpuDecision ftx_gpu_ = ::ftx::test::gpu_test_decision(::ftx::test::probe_this_machine()); \
    if (ftx_gpu_.action == ::ftx::test::GpuAction::kFail) FAIL() << ftx_gpu_.why;        \
    if (ftx_gpu_.action == ::ftx::test::GpuAction::kSkip) GTEST_SKIP() << ftx_gpu_.why;  \
  } while (0)
