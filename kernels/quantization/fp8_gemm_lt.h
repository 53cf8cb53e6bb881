#pragma once
// The E4M3 × E4M3 GEMM of FP8 (--fp8) through cuBLASLt: CUDA_R_8F_E4M3 operands, CUBLAS_COMPUTE_32F
// (fp32 accumulation, CUBLASLT_MATMUL_DESC_FAST_ACCUM off), the per-tensor scales through the
// A and B scale pointers, an fp32 D (and C, for beta). cuBLASLt runs FP8 in the "TN" form only, so
// the weight is held transposed, [N, K] row-major, as for int8 (int8_gemm_lt.h).
//
// Why no bias or GELU epilogue: with an fp32 D, cuBLASLt's FP8 bias must be bf16, which would round
// ftx's fp32 biases (the CPU twin adds them in fp32), and the op seam runs the GEMM and the bias and
// activation as separate ops; the engine's bias_activation follows as for every other GEMM.
// CPU twin: CpuBackend's FP8 GEMM (widening kernel, lib/cpu/widening_gemm.h).
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ftx::cuda {

// C[M, N] (row-major, fp32) = scales[0] · scales[1] · (a[M, K] · w_t[N, K]^T) + beta · C, a and w_t
// E4M3, scales a device pointer to {weights_scaling_factor, activation_scaling_factor}. K and N must
// be multiples of 16 and the operands 16-byte aligned (cuBLASLt's FP8 rules); Error otherwise or
// when cuBLASLt has no algorithm (a GPU before sm_89). Plans are cached per (M, N, K).
void fp8_gemm_lt(cublasLtHandle_t lt, cudaStream_t stream, int64_t M, int64_t N, int64_t K, const uint8_t* a,
                 const uint8_t* w_t, const float* scales, float* C, float beta, void* workspace,
                 size_t workspace_bytes);

}  // namespace ftx::cuda
