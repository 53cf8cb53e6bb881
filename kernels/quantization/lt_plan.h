#pragma once
// A cuBLASLt plan of the quantised GEMMs (int8_gemm_lt.h, fp8_gemm_lt.h): the matmul descriptor, the
// A, B and C/D layouts, and the algorithm cuBLASLt's heuristic puts first.
#include <cublasLt.h>

#include <cstddef>
#include <string>

namespace ftx::cuda {

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// Sets p.algo to the heuristic's first algorithm within `workspace_bytes` (D = C). When there is
// none, destroys the descriptor and layouts and throws Error("cuBLASLt has no <what> algorithm for
// <shape>: <why>").
void pick_lt_algo(cublasLtHandle_t lt, LtPlan& p, size_t workspace_bytes, const std::string& what,
                  const std::string& shape);

}  // namespace ftx::cuda
