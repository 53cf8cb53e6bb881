#pragma once
// Element types the CUDA kernels store (fp32, fp16, bf16) and their conversions to and from the
// fp32 the kernels compute in. Device code only; included by the .cu files of every room.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ftx::cuda {

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round to nearest even, as the host's float_to_half/float_to_bf16 (formats/dtype.h).
template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) { return v; }
template <>
__device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

}  // namespace ftx::cuda
