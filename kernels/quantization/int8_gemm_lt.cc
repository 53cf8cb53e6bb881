#include "kernels/quantization/int8_gemm_lt.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/quantization/lt_plan.h"

namespace ftx::cuda {

namespace {

// The TN plan of lt_plan.h (the form int8 requires) in int8 with int32 sums.
LtPlan make_plan(cublasLtHandle_t lt, int64_t M, int64_t N, int64_t K, size_t workspace_bytes) {
  LtPlan p = lt_tn_plan(CUBLAS_COMPUTE_32I, CUDA_R_32I, CUDA_R_8I, CUDA_R_32I, M, N, K);
  pick_lt_algo(lt, p, workspace_bytes, "int8",
               "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
  return p;
}

}  // namespace

void int8_gemm_lt(cublasLtHandle_t lt, cudaStream_t stream, int64_t M, int64_t N, int64_t K, const int8_t* a,
                  const int8_t* w_t, int32_t* acc, void* workspace, size_t workspace_bytes) {
  if (K % 4 != 0 || N % 4 != 0)
    throw Error("W8A8 GEMM on CUDA: K = " + std::to_string(K) + " and N = " + std::to_string(N) +
                " must be multiples of 4 (cuBLASLt's int8 rule)");
  if (reinterpret_cast<uintptr_t>(a) % 4 != 0 || reinterpret_cast<uintptr_t>(w_t) % 4 != 0)
    throw Error("W8A8 GEMM on CUDA: int8 operands must be 4-byte aligned");
  // Plans live for the process: a handful of shapes (decode rows, prefill lengths, four GEMMs).
  static std::mutex mu;
  static std::map<std::tuple<cublasLtHandle_t, int64_t, int64_t, int64_t>, LtPlan> plans;
  const LtPlan* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(lt, M, N, K);
    auto it = plans.find(key);
    if (it == plans.end()) it = plans.emplace(key, make_plan(lt, M, N, K, workspace_bytes)).first;
    p = &it->second;
  }
  const int32_t alpha = 1, beta = 0;
  FTX_CUBLAS_CHECK(cublasLtMatmul(lt, p->op, &alpha, w_t, p->a, a, p->b, &beta, acc, p->c, acc, p->c, &p->algo,
                                  workspace, workspace_bytes, stream));
}

}  // namespace ftx::cuda
