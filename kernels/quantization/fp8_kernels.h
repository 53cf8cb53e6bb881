#pragma once
// FP8 room (--fp8, --fp8-kv-cache; issue 29): the activation quantisation of the FP8 GEMM (the
// arithmetic at the end of lib/ops/op_types.h). The GEMM itself is cuBLASLt's (fp8_gemm_lt.h); the
// FP8 KV cache is stored and read by the attention kernels (attention/). Launcher conventions as in
// kernels/memory/memory_kernels.h.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/elem_kind.h"

namespace ftx::cuda {

// q[i] = E4M3(x[i] · inv_scale): the fp32 product rounded to nearest even and saturated to ±448
// (cvt.rn.satfinite.e4m3x2.f32 through __nv_cvt_float_to_fp8). CPU twin: quant::float_to_e4m3
// (lib/quant/fp8.h) on the same fp32 product.
// x is held in x_kind (the activations': fp32, fp16 or bf16).
void invoke_quantize_fp8(cudaStream_t stream, uint8_t* q, const void* x, ElemKind x_kind, size_t n, float inv_scale);

}  // namespace ftx::cuda
