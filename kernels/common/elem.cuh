#pragma once
// Element types the CUDA kernels store (fp32, fp16, bf16) and their conversions to and from the
// fp32 the kernels compute in. Device code only; included by the .cu files of every room.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "formats/error.h"
#include "kernels/common/elem_kind.h"

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

// An activation element at index i of `p`, held in `kind` (fp32, fp16 or bf16), widened to fp32 /
// rounded from it (nearest even). For kernels whose activation traffic is small beside what else
// they read (attention reads the KV cache; rotary a few dims per row): one runtime branch, uniform
// across the grid, instead of an instantiation per activation type.
__device__ inline float load_act(const void* p, ElemKind kind, int64_t i) {
  switch (kind) {
    case ElemKind::kFp16: return __half2float(static_cast<const __half*>(p)[i]);
    case ElemKind::kBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}
__device__ inline void store_act(void* p, ElemKind kind, int64_t i, float v) {
  switch (kind) {
    case ElemKind::kFp16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case ElemKind::kBf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// Calls f(T{}) with T the element type of an activation kind (fp32, fp16, bf16), for launchers
// templated on it; Error naming `what` for a kind activations are never held in.
template <typename F>
void with_act_type(ElemKind kind, const char* what, F&& f) {
  switch (kind) {
    case ElemKind::kFp32: f(float{}); return;
    case ElemKind::kFp16: f(__half{}); return;
    case ElemKind::kBf16: f(__nv_bfloat16{}); return;
    default: throw Error(std::string("CUDA ") + what + ": activations are fp32, fp16 or bf16");
  }
}

}  // namespace ftx::cuda
