// CudaBackend's cuBLASLt planning: a plan per shape, operand alignment and dtype, from
// gemm_config.in's row when the file has one that cuBLASLt accepts (classic cuBLAS rows run through
// cublasGemmEx, as FT's), else from cuBLASLt's heuristic; and run_gemm, the call every float GEMM
// ends in.
#include <string>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/lt_algo.h"
#include "kernels/cuda_backend/act_kinds.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/gemm_tune/gemm_tuner.h"

namespace ftx::cuda {

// gemm_config.in's classic algo ids are cublasGemmAlgo_t values (gemm::tuned_gemm_route).
static_assert(CUBLAS_GEMM_DEFAULT == -1, "gemm_config.in writes CUBLAS_GEMM_DEFAULT as -1");

namespace {

// cuBLAS's name for a weight dtype (elem_kind() has refused the others).
cudaDataType_t cuda_data_type(DType t) {
  switch (elem_kind(t)) {
    case ElemKind::kFp16: return CUDA_R_16F;
    case ElemKind::kBf16: return CUDA_R_16BF;
    case ElemKind::kFp32:
    case ElemKind::kInt8:
    case ElemKind::kFp8E4M3: break;  // elem_kind() returns neither (the KV cache's kinds only)
  }
  return CUDA_R_32F;
}

// Largest power of two ≤ 256 that divides the address (cuBLASLt's alignment classes).
uint32_t alignment_of(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (v % a) != 0) a /= 2;
  return a;
}

}  // namespace

void CudaBackend::clear_plans() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  plans_.clear();
}

void CudaBackend::use_gemm_config(const std::string& explicit_path, const std::string& model_dir) {
  // The file's rows for the dtype the GEMMs multiply in (the weights' dtype) apply.
  const gemm::GemmDType dtype = weight_dtype_ == DType::kFloat16    ? gemm::GemmDType::kFp16
                                : weight_dtype_ == DType::kBFloat16 ? gemm::GemmDType::kBf16
                                                                    : gemm::GemmDType::kFp32;
  algo_map_ = gemm::GemmAlgoMap::load(explicit_path, model_dir, device_identity(current_cuda_device()), dtype);
  if (algo_map_.active() && !blas_) {
    FTX_CUBLAS_CHECK(cublasCreate(&blas_));
    FTX_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    // The Lt workspace serves cuBLAS too: both run on stream_, in order.
    FTX_CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, kWorkspaceBytes));
  }
  clear_plans();  // GEMMs planned before now are planned again with the file
}

const CudaBackend::GemmPlan& CudaBackend::plan(const GemmKey& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  const auto [M, N, K, trans_b, align_a, align_b, align_c, in_dtype, c_dtype] = key;
  // Row-major C[M,N] = A[M,K]·B is column-major C^T[N,M] = B^T·A^T: cuBLASLt's "A" is our B
  // (column-major [N,K] with ld N, or with trans_b the stored [K,N] with ld K, transposed), its "B"
  // is our A (column-major [K,M], ld K), C is column-major [N,M], ld N. Half inputs (A already
  // in the weights' dtype) accumulate in fp32 and write an fp32 C or one of their own type.
  GemmPlan p;
  const bool half = in_dtype != DType::kFloat32;
  const cudaDataType_t in_type = cuda_data_type(in_dtype);
  const cudaDataType_t c_type = cuda_data_type(c_dtype);
  const cublasComputeType_t compute = tf32_ && !half ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  FTX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (trans_b)
    FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in_type, K, N, K));
  else
    FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in_type, N, K, N));
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, in_type, K, M, K));
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, c_type, N, M, N));

  const std::string shape = "gemm M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                            (trans_b ? " (B transposed)" : "") +
                            (c_dtype != DType::kFloat32 ? std::string(", ") + dtype_name(c_dtype) + " C" : "");
  // Lt's A is our B and vice versa.
  const uint32_t al_a = align_b, al_b = align_a, al_c = align_c;

  // gemm_config.in first (FT's key: m = rows, n = output features), as FT's cublasMMWrapper does.
  // An fp32 file is tuned for FP32 compute: with TF32 on, its timings do not apply. A half file's
  // cuBLASLt rows were timed with a half C (FT's GEMMs), as the activations' GEMMs of a half model
  // run here; the lm_head's C is fp32, so each row is used only when cuBLASLt accepts it.
  const bool use_file = half || !tf32_;
  if (const gemm::GemmAlgoRow* row = use_file ? algo_map_.find(1, static_cast<int>(M), static_cast<int>(N),
                                                               static_cast<int>(K), shape)
                                              : nullptr) {
    LtAlgoFields f;
    f.algo_id = row->algo_id;
    f.tile = static_cast<uint32_t>(row->tile);
    f.stages = static_cast<uint32_t>(row->stages);
    f.splitk = row->splitk;
    f.reduction = static_cast<uint32_t>(row->reduction_scheme);
    f.swizzle = static_cast<uint32_t>(row->swizzle);
    f.custom = static_cast<uint32_t>(row->custom_option);
    if (const gemm::TunedGemmRoute route = gemm::tuned_gemm_route(*row); route.classic) {
      // FT's gpt_gemm writes classic winners (all fp32 rows are): run them as FT does.
      p.classic = true;
      p.classic_algo = route.classic_algo;
      return plans_.emplace(key, p).first->second;
    }
    size_t ws_needed = 0;
    if (!rounds_once(f, c_type)) {
      gemm::gemm_log_to_stderr("warning: " + shape + ": the tuned algorithm " + std::to_string(row->algo_id) +
                               " adds its split-K partial sums in the half output type (reduction scheme " +
                               std::to_string(f.reduction) + "), which rounds C more than once; using the heuristic");
    } else if (build_lt_algo(lt_, compute, CUDA_R_32F, in_type, in_type, c_type, f, p.op, p.a, p.b, p.c,
                             kWorkspaceBytes, &p.algo, &ws_needed) &&
               lt_algo_accepts_alignment(p.algo, al_a, al_b, al_c)) {
      return plans_.emplace(key, p).first->second;
    } else {
      gemm::gemm_log_to_stderr("warning: " + shape + ": cuBLASLt does not accept the tuned algorithm " +
                               std::to_string(row->algo_id) + " for these operands; using the heuristic");
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  FTX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c));
  if (st == CUBLAS_STATUS_SUCCESS) st = prefer_rounding_once(pref, c_type);  // a half C: split-K sums in fp32
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
    throw Error("cuBLASLt has no algorithm for " + shape + ": " +
                (st != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(st) : "no heuristic result"));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void CudaBackend::run_gemm(int64_t M, int64_t N, int64_t K, const void* a, const void* B, DType in, bool trans_b,
                           void* C, DType c_dtype, float beta) {
  const cudaDataType_t in_type = cuda_data_type(in), c_type = cuda_data_type(c_dtype);
  const GemmPlan& p =
      plan(GemmKey{M, N, K, trans_b, alignment_of(a), alignment_of(B), alignment_of(C), in, c_dtype});
  const float alpha = 1.0f;
  if (p.classic) {  // the same column-major view as the Lt plan: C^T[N,M] = op(B)^T · A^T
    FTX_CUBLAS_CHECK(cublasGemmEx(blas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N),
                                  static_cast<int>(M), static_cast<int>(K), &alpha, B, in_type,
                                  static_cast<int>(trans_b ? K : N), a, in_type, static_cast<int>(K), &beta, C,
                                  c_type, static_cast<int>(N), CUBLAS_COMPUTE_32F,
                                  static_cast<cublasGemmAlgo_t>(p.classic_algo)));
    return;
  }
  FTX_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &alpha, B, p.a, a, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_,
                                  kWorkspaceBytes, stream_));
}
}  // namespace ftx::cuda
