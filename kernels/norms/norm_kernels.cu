// Norms and epilogues room. The layernorm reductions sum in double, as the CPU (only their order
// differs). Activations are fp32, fp16 or bf16 (the kernels' T); all arithmetic is fp32 (double for
// the statistics) and each result is rounded to T once, where it is stored.
// Each kernel mirrors the CPU reference in lib/cpu/cpu_backend.cc formula for formula (same operand
// order, double where the CPU uses double), so the two agree to a few ulp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/norms/norm_kernels.h"

namespace ftx::cuda {

namespace {

// Sum over the block; every thread gets the result. blockDim.x is a multiple of 32; `red` holds 32.
__device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullWarpMask, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `red` may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullWarpMask, v, o);
  return v;
}

// One block per row. Pass 1 applies the residual (x += y + bias, written back) and sums; pass 2
// sums squared deviations from the mean (two-pass, as the CPU: no cancellation); pass 3 writes
// the normalised row. With `cache` the row is kept in shared memory between passes. Each thread
// touches the same indices in every pass, so out == x is safe. kRms: RMSNorm, the same passes
// with the mean taken as 0 (x · rsqrt(mean(x²) + eps) · gamma, as lib/cpu/cpu_rms_norm.cc).
// T: the activations' type. A half residual is summed in fp32 and rounded once as it is written
// back; the statistics and the normalised row come from that rounded x (what the stream holds).
template <bool kRms, typename T>
__global__ void residual_layer_norm_kernel(T* x, const T* y, const float* bias, const float* gamma,
                                           const float* beta, T* out, int64_t H, float eps, bool cache) {
  extern __shared__ float row[];
  __shared__ double red[32];
  const int64_t r = blockIdx.x;
  T* xr = x + r * H;
  const T* yr = y ? y + r * H : nullptr;
  const bool add = yr || bias;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = to_float(xr[i]);
    if (add) {
      // CPU order: x += (y + bias), x += y, or x += bias.
      const float t = yr ? (bias ? to_float(yr[i]) + bias[i] : to_float(yr[i])) : bias[i];
      const T stored = from_float<T>(v + t);
      xr[i] = stored;
      v = to_float(stored);
    }
    if (cache) row[i] = v;
    sum += v;
  }
  if (!gamma) return;
  float mean = 0.0f;
  if (!kRms) {
    sum = block_sum(sum, red);
    mean = static_cast<float>(sum / static_cast<double>(H));
  }
  double var = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float d = (cache ? row[i] : to_float(xr[i])) - mean;
    var += static_cast<double>(d) * d;
  }
  var = block_sum(var, red);
  const float inv = static_cast<float>(1.0 / sqrt(var / static_cast<double>(H) + static_cast<double>(eps)));
  T* o = out + r * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float v = cache ? row[i] : to_float(xr[i]);
    o[i] = from_float<T>((v - mean) * inv * gamma[i] + (beta ? beta[i] : 0.0f));
  }
}

template <typename T>
__global__ void add_bias_kernel(T* x, const float* bias, int64_t rows, int64_t N) {
  const size_t n = static_cast<size_t>(rows) * N;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) + bias[i % N]);
}

__device__ float activate(Nonlinearity f, float x) {
  switch (f) {
    case Nonlinearity::kGeluErf: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Nonlinearity::kGeluTanh: {
      const float k = 0.79788456080286536f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    case Nonlinearity::kRelu: return x > 0.0f ? x : 0.0f;
    case Nonlinearity::kSilu: return x / (1.0f + expf(-x));
    case Nonlinearity::kSquaredRelu: return x > 0.0f ? x * x : 0.0f;
  }
  return x;
}

template <typename T>
__global__ void bias_activation_kernel(T* x, const float* bias, const T* gate, const float* gate_bias,
                                       int64_t rows, int64_t N, Nonlinearity act) {
  const size_t n = static_cast<size_t>(rows) * N;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t c = i % N;
    float v = activate(act, to_float(x[i]) + (bias ? bias[c] : 0.0f));
    if (gate) v *= to_float(gate[i]) + (gate_bias ? gate_bias[c] : 0.0f);
    x[i] = from_float<T>(v);
  }
}

}  // namespace

namespace {

template <bool kRms, typename T>
void launch_residual_norm(cudaStream_t stream, T* x, const T* y, const float* bias, const float* gamma,
                          const float* beta, T* out, int64_t rows, int64_t H, float eps) {
  if (rows <= 0 || H <= 0 || (!y && !bias && !gamma)) return;
  // About four elements per thread, 32..512 threads (a whole number of warps, block_sum needs it).
  const int64_t want = (H + 3) / 4;
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(512, std::max<int64_t>(32, (want + 31) / 32 * 32)));
  const bool cache = gamma && H * static_cast<int64_t>(sizeof(float)) <= 32 * 1024;
  const size_t smem = cache ? static_cast<size_t>(H) * sizeof(float) : 0;
  for (int64_t r0 = 0; r0 < rows; r0 += 65535 * 16) {  // grid.x limit is 2^31-1; chunk anyway for offsets
    const int64_t n = std::min<int64_t>(rows - r0, 65535 * 16);
    residual_layer_norm_kernel<kRms, T><<<static_cast<unsigned>(n), threads, smem, stream>>>(
        x + r0 * H, y ? y + r0 * H : nullptr, bias, gamma, beta, out ? out + r0 * H : nullptr, H, eps, cache);
    FTX_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void invoke_add_residual_layer_norm(cudaStream_t stream, ElemKind kind, void* x, const void* y, const float* bias,
                                    const float* gamma, const float* beta, void* out, int64_t rows, int64_t H,
                                    float eps) {
  with_act_type(kind, "layer norm", [&](auto tag) {
    using T = decltype(tag);
    launch_residual_norm<false>(stream, static_cast<T*>(x), static_cast<const T*>(y), bias, gamma, beta,
                                static_cast<T*>(out), rows, H, eps);
  });
}

void invoke_add_residual_rms_norm(cudaStream_t stream, ElemKind kind, void* x, const void* y, const float* bias,
                                  const float* gamma, void* out, int64_t rows, int64_t H, float eps) {
  with_act_type(kind, "RMS norm", [&](auto tag) {
    using T = decltype(tag);
    launch_residual_norm<true>(stream, static_cast<T*>(x), static_cast<const T*>(y), bias, gamma, nullptr,
                               static_cast<T*>(out), rows, H, eps);
  });
}

void invoke_add_bias(cudaStream_t stream, ElemKind kind, void* x, const float* bias, int64_t rows, int64_t N) {
  if (!bias || rows <= 0 || N <= 0) return;
  with_act_type(kind, "add_bias", [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<T><<<grid_for(static_cast<size_t>(rows) * N), 256, 0, stream>>>(static_cast<T*>(x), bias, rows,
                                                                                     N);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_add_bias_activation(cudaStream_t stream, ElemKind kind, void* x, const float* bias, const void* gate,
                                const float* gate_bias, int64_t rows, int64_t N, Nonlinearity f) {
  if (rows <= 0 || N <= 0) return;
  with_act_type(kind, "bias_activation", [&](auto tag) {
    using T = decltype(tag);
    bias_activation_kernel<T><<<grid_for(static_cast<size_t>(rows) * N), 256, 0, stream>>>(
        static_cast<T*>(x), bias, static_cast<const T*>(gate), gate_bias, rows, N, f);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
