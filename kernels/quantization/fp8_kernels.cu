#include "kernels/quantization/fp8_kernels.h"

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"

namespace ftx::cuda {

namespace {

template <typename T>
__global__ void quantize_fp8_kernel(uint8_t* q, const T* x, size_t n, float inv_scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    q[i] = __nv_cvt_float_to_fp8(to_float(x[i]) * inv_scale, __NV_SATFINITE, __NV_E4M3);
}

}  // namespace

void invoke_quantize_fp8(cudaStream_t stream, uint8_t* q, const void* x, ElemKind x_kind, size_t n, float inv_scale) {
  if (n == 0) return;
  with_act_type(x_kind, "FP8 quantisation", [&](auto tag) {
    using T = decltype(tag);
    quantize_fp8_kernel<T><<<grid_for(n), 256, 0, stream>>>(q, static_cast<const T*>(x), n, inv_scale);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
