// Prompt scoring room (log_prob_kernels.h): per row a block max, then Σ exp(l - max) with each term
// widened to double and summed per thread, then a shuffle tree: the host sums the same terms in
// index order, so the two differ by double rounding (~1e-16 relative), far below the float result's.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/cuda_check.h"
#include "kernels/common/launch.cuh"
#include "kernels/sampling/log_prob_kernels.h"

namespace ftx::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity, T* red) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullWarpMask, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullWarpMask, v, o));
  return v;
}

struct MaxF {
  // A NaN wins, so a row holding one gives NaN (as the host's).
  __device__ float operator()(float a, float b) const { return (a != a || a > b) ? a : b; }
};
struct SumD {
  __device__ double operator()(double a, double b) const { return a + b; }
};

__global__ void token_log_probs_kernel(const float* logits, int64_t stride, int64_t vocab, const int32_t* targets,
                                       float* out) {
  __shared__ float red_f[32];
  __shared__ double red_d[32];
  const float* l = logits + static_cast<int64_t>(blockIdx.x) * stride;
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) max = MaxF{}(l[i], max);
  max = block_reduce(max, MaxF{}, -INFINITY, red_f);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) sum += exp(static_cast<double>(l[i]) - max);
  sum = block_reduce(sum, SumD{}, 0.0, red_d);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<float>(static_cast<double>(l[targets[blockIdx.x]]) - max - log(sum));
}

}  // namespace

void invoke_token_log_probs(cudaStream_t stream, const float* logits, int64_t rows, int64_t stride, int64_t vocab,
                            const int32_t* targets, float* out) {
  if (rows == 0) return;
  token_log_probs_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, stride, vocab, targets, out);
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
