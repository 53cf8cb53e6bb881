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
    dst[i] = from_float<T>(scale ? static_cast<float>(q[i]) * scale[i % static_cast<size_t>(N)]
                                 : static_cast<float>(q[i]));
}

// C[m][n] = acc[m][n] · scale[n] + beta · C[m][n] in fp32, rounded to C's type once.
template <typename T>
__global__ void scale_columns_kernel(T* C, const float* acc, const float* scale, int64_t M, int64_t N, float beta) {
  const size_t total = static_cast<size_t>(M) * static_cast<size_t>(N);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float y = acc[i] * scale[i % static_cast<size_t>(N)];
    C[i] = from_float<T>(beta == 0.0f ? y : y + beta * to_float(C[i]));
  }
}

// cvt.rni.sat.s8.f32: round half to even, saturate to [-128, 127], NaN -> 0 (TensorRT-LLM's
// cuda_cast<int8_t>).
__device__ __forceinline__ int8_t to_int8_rne(float v) {
  int32_t r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(v));
  return static_cast<int8_t>(r);
}

template <typename T>
__global__ void quantize_per_tensor_kernel(int8_t* q, const T* x, size_t n, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    q[i] = to_int8_rne(to_float(x[i]) * scale);
}

constexpr int kRowThreads = 256;

template <typename T>
__global__ void quantize_per_token_kernel(int8_t* q, float* alpha_row, const T* x, int64_t K) {
  __shared__ float partial[kRowThreads];
  const T* row = x + blockIdx.x * K;
  float amax = 0.0f;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) amax = fmaxf(amax, fabsf(to_float(row[k])));
  partial[threadIdx.x] = amax;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  amax = partial[0];
  const float scale = 127.0f / amax;  // inf for an all-zero row: 0·inf = NaN -> 0
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) q[blockIdx.x * K + k] = to_int8_rne(to_float(row[k]) * scale);
  if (threadIdx.x == 0) alpha_row[blockIdx.x] = amax / 127.0f;
}

template <typename T>
__global__ void dequantize_int32_kernel(T* C, const int32_t* acc, int64_t M, int64_t N, const float* alpha_row,
                                        float row_scale, const float* alpha_col, float beta) {
  const size_t total = static_cast<size_t>(M) * static_cast<size_t>(N);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t m = i / static_cast<size_t>(N), n = i % static_cast<size_t>(N);
    const float ar = alpha_row ? alpha_row[m] : row_scale;
    const float y = static_cast<float>(acc[i]) * (ar * alpha_col[n]);
    C[i] = from_float<T>(beta == 0.0f ? y : y + beta * to_float(C[i]));
  }
}

}  // namespace

void invoke_quantize_per_tensor(cudaStream_t stream, int8_t* q, const void* x, ElemKind x_kind, int64_t n,
                                float scale) {
  if (n <= 0) return;
  with_act_type(x_kind, "W8A8 quantisation", [&](auto tag) {
    using T = decltype(tag);
    quantize_per_tensor_kernel<T><<<grid_for(static_cast<size_t>(n)), 256, 0, stream>>>(
        q, static_cast<const T*>(x), static_cast<size_t>(n), scale);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_quantize_per_token(cudaStream_t stream, int8_t* q, float* alpha_row, const void* x, ElemKind x_kind,
                               int64_t M, int64_t K) {
  if (M <= 0 || K <= 0) return;
  with_act_type(x_kind, "W8A8 quantisation", [&](auto tag) {
    using T = decltype(tag);
    quantize_per_token_kernel<T><<<static_cast<unsigned>(M), kRowThreads, 0, stream>>>(q, alpha_row,
                                                                                      static_cast<const T*>(x), K);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_dequantize_int32(cudaStream_t stream, void* C, ElemKind c_kind, const int32_t* acc, int64_t M, int64_t N,
                             const float* alpha_row, float row_scale, const float* alpha_col, float beta) {
  const size_t n = static_cast<size_t>(M) * static_cast<size_t>(N);
  if (n == 0) return;
  with_act_type(c_kind, "W8A8 output", [&](auto tag) {
    using T = decltype(tag);
    dequantize_int32_kernel<T><<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(C), acc, M, N, alpha_row, row_scale,
                                                                alpha_col, beta);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_scale_columns(cudaStream_t stream, void* C, ElemKind c_kind, const float* acc, const float* scale,
                          int64_t M, int64_t N, float beta) {
  const size_t n = static_cast<size_t>(M) * static_cast<size_t>(N);
  if (n == 0) return;
  with_act_type(c_kind, "weight-only INT8 output", [&](auto tag) {
    using T = decltype(tag);
    scale_columns_kernel<T><<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(C), acc, scale, M, N, beta);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

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
