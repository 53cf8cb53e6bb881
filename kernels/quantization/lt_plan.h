#pragma once
// A cuBLASLt plan of the quantised GEMMs (int8_gemm_lt.h, fp8_gemm_lt.h): the matmul descriptor, the
// A, B and C/D layouts, and the algorithm cuBLASLt's heuristic puts first.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ftx::cuda {

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// The TN form both quantised GEMMs take: row-major out[M,N] = a[M,K]·w_t[N,K]^T is column-major
// out^T[N,M] = w_t^T·a^T, so cuBLASLt's "A" is w_t seen column-major [K, N] (ld K) and transposed,
// its "B" is a seen column-major [K, M] (ld K), C/D is column-major [N, M] (ld N). Returns the
// descriptor and the layouts; the caller sets its own attributes and then calls pick_lt_algo.
LtPlan lt_tn_plan(cublasComputeType_t compute, cudaDataType_t scale, cudaDataType_t in, cudaDataType_t out,
                  int64_t M, int64_t N, int64_t K);

// Up to `count` algorithms within `workspace_bytes` (D = C), in the heuristic's order. When there
// is none, destroys the descriptor and layouts and throws Error("cuBLASLt has no <what> algorithm
// for <shape>: <why>").
std::vector<cublasLtMatmulAlgo_t> lt_algo_candidates(cublasLtHandle_t lt, LtPlan& p, size_t workspace_bytes,
                                                     int count, const std::string& what, const std::string& shape);

// Sets p.algo to the heuristic's first algorithm (lt_algo_candidates with count 1).
void pick_lt_algo(cublasLtHandle_t lt, LtPlan& p, size_t workspace_bytes, const std::string& what,
                  const std::string& shape);

}  // namespace ftx::cuda
