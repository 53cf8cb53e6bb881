#pragma once
// The dtypes weights and the KV cache may be held in, as the launchers see them (the .cu files do
// not see formats/dtype.h; the CUDA backend maps DType to this in kernels/cuda_backend/act_kinds.h).
namespace ftx::cuda {

// kInt8, kFp8E4M3: the KV cache only (--int8-kv-cache, --fp8-kv-cache, with a scale per layer);
// weights never use them (FP8 weights go to cuBLASLt directly, kernels/quantization/fp8_gemm_lt.h).
enum class ElemKind { kFp32, kFp16, kBf16, kInt8, kFp8E4M3 };

}  // namespace ftx::cuda
