#include "kernels/quantization/fp8_gemm_lt.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/quantization/lt_plan.h"

namespace ftx::cuda {

namespace {

// The A (weight) and B (activation) scale pointers of one call.
void set_scale_pointers(const LtPlan& p, const float* scales) {
  const float* w_scale = scales;                          // cuBLASLt's A is the weight
  const float* a_scale = scales + kFp8ActivationScaleSlot;  // its B the activations
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof(a_scale)));
}

// A plan and the algorithms its heuristic offered, until the first call settles on the first one
// cublasLtMatmul accepts. On an H200 (CUDA 13.0) the heuristic's first FP8 algorithm was refused by
// cublasLtMatmul with CUBLAS_STATUS_NOT_SUPPORTED (bench/results/gpu-2026-11-30), with the scale
// pointers set before the heuristic or not. The heuristic does not see the pointers, and a refused
// algorithm enqueues nothing, so the next one may be tried.
struct Fp8Plan {
  LtPlan lt;
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool settled = false;
};

constexpr int kCandidates = 16;

std::string shape_name(int64_t M, int64_t N, int64_t K) {
  return "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
}

// The TN plan of lt_plan.h in FP8 E4M3 with fp32 output; the scale pointers are set before the
// heuristic is asked, and again per call (each weight has its own).
Fp8Plan make_plan(cublasLtHandle_t lt, int64_t M, int64_t N, int64_t K, const float* scales, size_t workspace_bytes) {
  Fp8Plan p;
  p.lt = lt_tn_plan(CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_32F, M, N, K);
  const int8_t fast_accum = 0;  // fp32 accumulation throughout, as the CPU twin sums
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.lt.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                                  sizeof(fast_accum)));
  set_scale_pointers(p.lt, scales);
  p.candidates = lt_algo_candidates(lt, p.lt, workspace_bytes, kCandidates, "FP8", shape_name(M, N, K));
  p.lt.algo = p.candidates.front();
  return p;
}

std::string address_residues(std::initializer_list<std::pair<const char*, const void*>> pointers) {
  std::string out;
  for (const auto& [name, ptr] : pointers)
    out += std::string(out.empty() ? "" : ", ") + name + " " + std::to_string(reinterpret_cast<uintptr_t>(ptr) % 256);
  return out;
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
  static std::map<std::tuple<cublasLtHandle_t, int64_t, int64_t, int64_t>, Fp8Plan> plans;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(lt, M, N, K);
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, make_plan(lt, M, N, K, scales, workspace_bytes)).first;
  Fp8Plan& p = it->second;
  set_scale_pointers(p.lt, scales);
  const float alpha = 1.0f;
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(lt, p.lt.op, &alpha, w_t, p.lt.a, a, p.lt.b, &beta, C, p.lt.c, C, p.lt.c, &algo, workspace,
                          workspace_bytes, stream);
  };
  if (p.settled) {
    FTX_CUBLAS_CHECK(run(p.lt.algo));
    return;
  }
  // A refused algorithm enqueues nothing, so the next may be tried.
  for (const cublasLtMatmulAlgo_t& algo : p.candidates) {
    const cublasStatus_t st = run(algo);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) continue;
    FTX_CUBLAS_CHECK(st);
    p.lt.algo = algo;
    p.settled = true;
    return;
  }
  throw Error("FP8 GEMM on CUDA: cublasLtMatmul refused all " + std::to_string(p.candidates.size()) +
              " algorithms its heuristic offered for " + shape_name(M, N, K) + " (CUBLAS_STATUS_NOT_SUPPORTED; " +
              "addresses mod 256: " +
              address_residues({{"weight", w_t}, {"activations", a}, {"C", C}, {"scales", scales},
                                {"workspace", workspace}}) +
              ", workspace " + std::to_string(workspace_bytes) + " bytes)");
}

}  // namespace ftx::cuda
