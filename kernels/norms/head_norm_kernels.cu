// Per-head norms and caps room. QK-norm: one warp per (row, head), whose head_dim values (at most a
// few hundred) each lane reads a few of; the sum of squares in double as the CPU's (only the order
// differs), then x · inv · gamma in fp32 as the CPU writes it, rounded to the activations' type once.
// Softcap: one thread per element, tanhf (2 ulp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/norms/head_norm_kernels.h"

namespace ftx::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;

template <typename T>
__global__ void head_rms_norm_kernel(T* qkv, int64_t rows, int64_t stride, int64_t q_heads, int64_t heads, int d,
                                     const float* gamma_q, const float* gamma_k, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t pairs = rows * heads;
  // The loop condition is the same for the whole warp, so every lane reaches the shuffles.
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const int64_t r = p / heads, h = p % heads;
    T* x = qkv + r * stride + h * d;
    const float* gamma = h < q_heads ? gamma_q : gamma_k;
    double sq = 0.0;
    for (int i = lane; i < d; i += 32) {
      const float v = to_float(x[i]);
      sq += static_cast<double>(v) * v;
    }
    for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(kFullWarpMask, sq, o);
    const float inv = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(d) + static_cast<double>(eps)));
    for (int i = lane; i < d; i += 32) x[i] = from_float<T>(to_float(x[i]) * inv * gamma[i]);
  }
}

__global__ void softcap_kernel(float* x, size_t n, float cap) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

}  // namespace

void invoke_head_rms_norm(cudaStream_t stream, ElemKind kind, void* qkv, int64_t rows, int64_t stride,
                          int64_t q_heads, int64_t kv_heads, int64_t head_dim, const float* gamma_q,
                          const float* gamma_k, float eps) {
  const int64_t heads = q_heads + kv_heads;
  if (rows <= 0 || heads <= 0 || head_dim <= 0) return;
  const size_t pairs = static_cast<size_t>(rows) * static_cast<size_t>(heads);
  const unsigned blocks = grid_for(pairs, kWarpsPerBlock);
  with_act_type(kind, "head_rms_norm", [&](auto tag) {
    using T = decltype(tag);
    head_rms_norm_kernel<T><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
        static_cast<T*>(qkv), rows, stride, q_heads, heads, static_cast<int>(head_dim), gamma_q, gamma_k, eps);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_softcap(cudaStream_t stream, float* x, int64_t rows, int64_t N, float cap) {
  if (rows <= 0 || N <= 0) return;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(N);
  softcap_kernel<<<grid_for(n), 256, 0, stream>>>(x, n, cap);
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
