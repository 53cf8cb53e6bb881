#pragma once
// The int8 × int8 → int32 GEMM of SmoothQuant W8A8 through cuBLASLt (CUDA_R_8I operands,
// CUBLAS_COMPUTE_32I, CUDA_R_32I result). cuBLASLt runs int8 with ordinary (column-major) layouts
// only as "TN", so the weight is held transposed, [N, K] row-major: each output column's K values
// contiguous, as TensorRT-LLM and FT hold their int8 weights. CPU twin: cpu::int8_matmul_s32
// (lib/cpu/w8a8_gemm.h), which takes the weight [K, N].
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ftx::cuda {

// acc[M, N] (row-major) = a[M, K] (row-major) · w_t[N, K]^T, in int32. K and N must be multiples of 4
// and the pointers 4-byte aligned (cuBLASLt's int8 rule); Error otherwise or when cuBLASLt has no
// algorithm. Plans are cached per (M, N, K).
void int8_gemm_lt(cublasLtHandle_t lt, cudaStream_t stream, int64_t M, int64_t N, int64_t K, const int8_t* a,
                  const int8_t* w_t, int32_t* acc, void* workspace, size_t workspace_bytes);

}  // namespace ftx::cuda
