#pragma once
// GEMM algorithm search on the current GPU (as FT's gpt_gemm searches), for `ftx gemm-tune`. Plain C++
// interface (no CUDA types) so lib/ and cmd/ can include it; only built when CUDA is.
//
// Per problem:
//  1. classic cuBLAS sweep: cublasGemmEx / cublasGemmStridedBatchedEx over FT's algo range
//     (fp32: CUBLAS_GEMM_DEFAULT..ALGO23; fp16/bf16: DEFAULT_TENSOR_OP..ALGO15_TENSOR_OP);
//  2. when asked (problem.try_cublaslt): cuBLASLt candidates = cublasLtMatmulAlgoGetHeuristic results
//     plus an enumeration of every algo id x tile x stages x custom option x CTA swizzle x split-K
//     {1,2,3,4,5,6,8,12,16,32} x reduction scheme the algo's capabilities allow, each kept only if
//     cublasLtMatmulAlgoCheck passes within the workspace limit (enumeration capped). Every
//     candidate is rebuilt from the fields gemm_config.in stores (algoId, tile, stages, splitK,
//     reduction, swizzle, customOption) and re-checked, so what is timed is exactly what a reader of
//     the file reconstructs; heuristic results that need other fields (inner/cluster shape) and
//     cannot be rebuilt are dropped.
// Each candidate: warm-up calls, then `repeats` timings between CUDA events of `iters_per_repeat`
// back-to-back calls; the candidate's time is the median per-call time. The fastest wins.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "lib/gemm/gemm_config_file.h"

namespace ftx::cuda {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int runtime_version = 0;   // cudaRuntimeGetVersion, e.g. 13000
  int driver_version = 0;    // cudaDriverGetVersion
  int cublaslt_version = 0;  // cublasLtGetVersion, e.g. 130100
  size_t total_memory = 0, free_memory = 0;
};

// Number of visible devices; 0 when there is none or the driver cannot be loaded. Never throws.
int cuda_device_count();
// The current device. Error "no CUDA device found (cudaGetDeviceCount: ...)" without one.
CudaDeviceInfo current_cuda_device();
// What gemm_config.in records of a device (and checks a file against).
gemm::DeviceIdentity device_identity(const CudaDeviceInfo& d);

enum class TuneDType { kFp32, kFp16, kBf16 };

// One GEMM in cuBLAS's column-major terms, as FT issues it: C[n_out x m_rows] = op(W) * X, with W
// the "A" operand. Weight W is [n_out x k] (lda = n_out), or stored [k x n_out] when transpose_a
// (lda = k). X is [k x m_rows], C is [n_out x m_rows]. strided_batched runs batch_count such
// products with densely packed strides.
struct GemmProblem {
  int m_rows = 0, n_out = 0, k = 0, batch_count = 1;
  bool transpose_a = false;
  bool strided_batched = false;
  bool fp32_output = false;  // C in FP32 (FT's Q*K^T)
  bool try_cublaslt = false;
};

struct TuneOptions {
  size_t workspace_limit = 32u << 20;  // FT's CUBLAS_WORKSPACE_SIZE
  int warmup = 3;
  int repeats = 9;
  int iters_per_repeat = 10;
  int max_enumerated = 5000;   // AlgoCheck-valid combinations kept from the enumeration
  int max_checks = 200000;     // cublasLtMatmulAlgoCheck calls per GEMM (bounds the CPU time of the enumeration)
  int max_heuristic = 50;      // cublasLtMatmulAlgoGetHeuristic results requested
  int max_enumerated_timed = 50;
};

struct TunedAlgo {
  bool cublaslt = false;  // false: classic cuBLAS algo id, all Lt fields -1
  int algo_id = 0;
  int custom_option = -1, tile = -1, splitk = -1, swizzle = -1, reduction_scheme = -1;
  int workspace_size = -1, stages = -1;
  float time_ms = 0.0f;
  int candidates_timed = 0;
};

// Called after each timed candidate: (candidates timed so far, candidates to time, best ms so far).
using TuneProgress = std::function<void(int, int, float)>;

class GemmTuner {
 public:
  GemmTuner(TuneDType dtype, const TuneOptions& options);
  ~GemmTuner();
  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;
  // Error when no candidate at all runs (which would mean a broken setup, not a slow GPU).
  TunedAlgo tune(const GemmProblem& p, const TuneProgress& progress = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ftx::cuda
