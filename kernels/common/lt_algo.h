#pragma once
// A cuBLASLt algorithm as gemm_config.in stores it (FT's columns: algoId, customOption, tile,
// splitK_val, swizzle, reductionScheme, stages), and its reconstruction. Shared by `ftx gemm-tune`,
// which times exactly what a reader will rebuild, and the CUDA backend, which reads the file.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>

namespace ftx::cuda {

struct LtAlgoFields {
  int algo_id = 0;
  uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
  int32_t splitk = 1;
};

// Initialises `algo` from `f` for the given compute/scale/operand types and checks it against the
// matmul (`op`, layouts a, b, c; D = C). False when cuBLASLt rejects any field, the check fails, or
// the algorithm needs more than `workspace_limit` bytes; else true with its workspace in *workspace.
bool build_lt_algo(cublasLtHandle_t lt, cublasComputeType_t compute, cudaDataType_t scale, cudaDataType_t a_type,
                   cudaDataType_t b_type, cudaDataType_t c_type, const LtAlgoFields& f, cublasLtMatmulDesc_t op,
                   cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                   size_t workspace_limit, cublasLtMatmulAlgo_t* algo, size_t* workspace);

// True when the algorithm accepts operands with these alignments (bytes) of A, B and C/D
// (CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_*; AlgoCheck does not see the pointers, cublasLtMatmul does).
bool lt_algo_accepts_alignment(const cublasLtMatmulAlgo_t& algo, uint32_t align_a, uint32_t align_b, uint32_t align_c);

// The stored fields of an algorithm (e.g. a heuristic result); false when one cannot be read.
bool read_lt_algo(const cublasLtMatmulAlgo_t& algo, LtAlgoFields* f);

// Split-K reduction schemes that keep a GEMM's contract "C is rounded once, after the fp32 sum"
// (lib/ops/backend.h). INPLACE adds the partial sums in the output buffer, in C's type, and
// OUTPUT_TYPE keeps them in C's type in the workspace: for a half C both round every partial sum.
// COMPUTE_TYPE keeps them in fp32 and rounds the total once. An fp32 C takes any scheme.
// For CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK (the heuristic) and the tuner's enumeration.
uint32_t reductions_rounding_once(cudaDataType_t c_type);
// Whether `f` (a gemm_config.in row or a heuristic result) keeps that contract for a C of c_type.
bool rounds_once(const LtAlgoFields& f, cudaDataType_t c_type);
// Restricts the heuristic behind `pref` to those schemes; the status of the attribute call.
cublasStatus_t prefer_rounding_once(cublasLtMatmulPreference_t pref, cudaDataType_t c_type);

}  // namespace ftx::cuda
