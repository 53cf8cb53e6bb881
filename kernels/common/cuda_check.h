#pragma once
// Error checks for CUDA runtime, cuBLAS and cuBLASLt calls. A failed call throws ftx::Error
// carrying the call's text, the library's error name and message, and file:line, e.g.
//   cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of memory) at kernels/x.cc:12
// Use FTX_CUDA_CHECK / FTX_CUBLAS_CHECK for calls that must succeed; where a failure is an expected
// answer (an algorithm that does not run on this GPU), test the returned status instead.
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string>

#include "formats/error.h"

namespace ftx::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") at " +
              file + ":" + std::to_string(line));
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) +
              ") at " + file + ":" + std::to_string(line));
}

}  // namespace ftx::cuda

#define FTX_CUDA_CHECK(call)                                                            \
  do {                                                                                  \
    cudaError_t ftx_cuda_err_ = (call);                                                 \
    if (ftx_cuda_err_ != cudaSuccess)                                                   \
      ::ftx::cuda::throw_cuda_error(ftx_cuda_err_, #call, __FILE__, __LINE__);         \
  } while (0)

// cuBLAS and cuBLASLt share cublasStatus_t.
#define FTX_CUBLAS_CHECK(call)                                                          \
  do {                                                                                  \
    cublasStatus_t ftx_cublas_st_ = (call);                                             \
    if (ftx_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                        \
      ::ftx::cuda::throw_cublas_error(ftx_cublas_st_, #call, __FILE__, __LINE__);      \
  } while (0)
