#include "kernels/common/lt_algo.h"

#include <utility>

namespace ftx::cuda {

namespace {

template <typename T>
bool set_config(cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  return cublasLtMatmulAlgoConfigSetAttribute(algo, attr, &v, sizeof v) == CUBLAS_STATUS_SUCCESS;
}

template <typename T>
bool get_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T* out) {
  size_t written = 0;
  return cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, out, sizeof *out, &written) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

bool build_lt_algo(cublasLtHandle_t lt, cublasComputeType_t compute, cudaDataType_t scale, cudaDataType_t a_type,
                   cudaDataType_t b_type, cudaDataType_t c_type, const LtAlgoFields& f, cublasLtMatmulDesc_t op,
                   cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                   size_t workspace_limit, cublasLtMatmulAlgo_t* algo, size_t* workspace) {
  if (cublasLtMatmulAlgoInit(lt, compute, scale, a_type, b_type, c_type, c_type, f.algo_id, algo) !=
      CUBLAS_STATUS_SUCCESS)
    return false;
  if (!set_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, f.tile) ||
      !set_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, f.stages) ||
      !set_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, f.splitk) ||
      !set_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, f.reduction) ||
      !set_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, f.swizzle) ||
      !set_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, f.custom))
    return false;
  cublasLtMatmulHeuristicResult_t r{};
  if (cublasLtMatmulAlgoCheck(lt, op, a, b, c, c, algo, &r) != CUBLAS_STATUS_SUCCESS) return false;
  if (r.workspaceSize > workspace_limit) return false;
  *workspace = r.workspaceSize;
  return true;
}

bool lt_algo_accepts_alignment(const cublasLtMatmulAlgo_t& algo, uint32_t align_a, uint32_t align_b, uint32_t align_c) {
  const std::pair<cublasLtMatmulAlgoCapAttributes_t, uint32_t> needs[] = {
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES, align_a},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES, align_b},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES, align_c},
      {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES, align_c},
  };
  for (const auto& [attr, have] : needs) {
    uint32_t need = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &need, sizeof need, &written) != CUBLAS_STATUS_SUCCESS)
      return false;  // unknown requirement: do not risk it
    if (need > have) return false;
  }
  return true;
}

bool read_lt_algo(const cublasLtMatmulAlgo_t& algo, LtAlgoFields* f) {
  return get_config(algo, CUBLASLT_ALGO_CONFIG_ID, &f->algo_id) &&
         get_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &f->tile) &&
         get_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &f->stages) &&
         get_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &f->splitk) &&
         get_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &f->reduction) &&
         get_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &f->swizzle) &&
         get_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &f->custom);
}

uint32_t reductions_rounding_once(cudaDataType_t c_type) {
  return c_type == CUDA_R_32F ? static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK)
                              : static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
}

bool rounds_once(const LtAlgoFields& f, cudaDataType_t c_type) {
  // Without split-K there is one sum per output, whatever the field says.
  return f.splitk <= 1 || f.reduction == CUBLASLT_REDUCTION_SCHEME_NONE ||
         (f.reduction & ~reductions_rounding_once(c_type)) == 0;
}

cublasStatus_t prefer_rounding_once(cublasLtMatmulPreference_t pref, cudaDataType_t c_type) {
  const uint32_t mask = reductions_rounding_once(c_type);
  return cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask);
}

}  // namespace ftx::cuda
