#include "kernels/quantization/quantize_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"

namespace ftx::cuda {

namespace {

template <typename T>
__global__ void dequantize_int8_columns_kernel(T* dst, const int8_t* q, const float* scale, int64_t K, int64_t N) {
  const size_t total = static_cast<size_t>(K) * static_cast<size_t>(N);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(static_cast<float>(q[i]) * scale[i % static_cast<size_t>(N)]);
}

}  // namespace

void invoke_dequantize_int8_columns(cudaStream_t stream, void* dst, ElemKind kind, const int8_t* q,
                                    const float* scale, int64_t K, int64_t N) {
  const size_t n = static_cast<size_t>(K) * static_cast<size_t>(N);
  if (n == 0) return;
  if (kind == ElemKind::kFp16)
    dequantize_int8_columns_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__half*>(dst), q, scale, K, N);
  else if (kind == ElemKind::kBf16)
    dequantize_int8_columns_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), q, scale, K, N);
  else
    dequantize_int8_columns_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<float*>(dst), q, scale, K, N);
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
