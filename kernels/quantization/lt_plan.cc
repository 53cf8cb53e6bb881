#include "kernels/quantization/lt_plan.h"

#include "formats/error.h"
#include "kernels/common/cuda_check.h"

namespace ftx::cuda {

LtPlan lt_tn_plan(cublasComputeType_t compute, cudaDataType_t scale, cudaDataType_t in, cudaDataType_t out,
                  int64_t M, int64_t N, int64_t K) {
  LtPlan p;
  FTX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute, scale));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in, K, N, K));
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, in, K, M, K));
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out, N, M, N));
  return p;
}

std::vector<cublasLtMatmulAlgo_t> lt_algo_candidates(cublasLtHandle_t lt, LtPlan& p, size_t workspace_bytes,
                                                     int count, const std::string& what, const std::string& shape) {
  cublasLtMatmulPreference_t pref = nullptr;
  FTX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes;
  FTX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.c, pref, count, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  std::vector<cublasLtMatmulAlgo_t> algos;
  if (st == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i)
      if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) algos.push_back(results[static_cast<size_t>(i)].algo);
  if (algos.empty()) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
    throw Error("cuBLASLt has no " + what + " algorithm for " + shape + ": " +
                (st != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(st) : "no heuristic result"));
  }
  return algos;
}

void pick_lt_algo(cublasLtHandle_t lt, LtPlan& p, size_t workspace_bytes, const std::string& what,
                  const std::string& shape) {
  p.algo = lt_algo_candidates(lt, p, workspace_bytes, 1, what, shape).front();
}

}  // namespace ftx::cuda
