#include "kernels/quantization/fp8_gemm_lt.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/quantization/lt_plan.h"

namespace ftx::cuda {

namespace {

// The TN plan of lt_plan.h in FP8 E4M3 with fp32 output. The scale pointers are set per call (each
// weight has its own).
LtPlan make_plan(cublasLtHandle_t lt, int64_t M, int64_t N, int64_t K, size_t workspace_bytes) {
  LtPlan p = lt_tn_plan(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_32F, M, N, K);
  const int8_t fast_accum = 0;  // fp32 accumulation throughout, as the CPU twin sums
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                                  sizeof(fast_accum)));
  pick_lt_algo(lt, p, workspace_bytes, "FP8",
               "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
  return p;
}

}  // namespace

void fp8_gemm_lt(cublasLtHandle_t lt, cudaStream_t stream, int64_t M, int64_t N, int64_t K, const uint8_t* a,
                 const uint8_t* w_t, const float* scales, float* C, float beta, void* workspace,
                 size_t workspace_bytes) {
  if (K % 16 != 0 || N % 16 != 0)
    throw Error("FP8 GEMM on CUDA: K = " + std::to_string(K) + " and N = " + std::to_string(N) +
                " must be multiples of 16 (cuBLASLt's FP8 rule)");
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(w_t), static_cast<const void*>(C)})
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) throw Error("FP8 GEMM on CUDA: operands must be 16-byte aligned");
  // Plans live for the process (a handful of shapes); the descriptor's scale pointers change per
  // call, so the lock covers setting them and enqueueing the matmul.
  static std::mutex mu;
  static std::map<std::tuple<cublasLtHandle_t, int64_t, int64_t, int64_t>, LtPlan> plans;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(lt, M, N, K);
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, make_plan(lt, M, N, K, workspace_bytes)).first;
  const LtPlan& p = it->second;
  const float* w_scale = scales;      // cuBLASLt's A is the weight
  const float* a_scale = scales + 1;  // its B the activations
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof(a_scale)));
  const float alpha = 1.0f;
  FTX_CUBLAS_CHECK(cublasLtMatmul(lt, p.op, &alpha, w_t, p.a, a, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace,
                                  workspace_bytes, stream));
}

}  // namespace ftx::cuda
