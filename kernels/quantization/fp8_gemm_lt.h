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

// Where the activation's scale sits in a weight's scales, in floats: each scale pointer on its own
// 16 bytes.
constexpr int kFp8ActivationScaleSlot = 4;

// C[M, N] (row-major, fp32) = s_w · s_x · (a[M, K] · w_t[N, K]^T) + beta · C, a and w_t E4M3,
// scales a device pointer with s_w (weights_scaling_factor) at scales[0] and s_x
// (activation_scaling_factor) at scales[kFp8ActivationScaleSlot]. K and N must be multiples of 16
// and the operands 16-byte aligned (cuBLASLt's FP8 rules); Error otherwise, when cuBLASLt has no
// algorithm (a GPU before sm_89), or when cublasLtMatmul refuses every algorithm the heuristic
// offers. Plans are cached per (M, N, K).
void fp8_gemm_lt(cublasLtHandle_t lt, cudaStream_t stream, int64_t M, int64_t N, int64_t K, const uint8_t* a,
                 const uint8_t* w_t, const float* scales, float* C, float beta, void* workspace,
                 size_t workspace_bytes);

}  // namespace ftx::cuda
