// MoE room: routing, the counting sort of slots by expert, and the weighted combine. Each mirrors
// lib/cpu/moe_ffn.cc formula for formula (double where the CPU sums in double, the same orders), so
// the experts chosen are the CPU's and the outputs agree to the GEMMs' rounding.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/moe/moe_kernels.h"

namespace ftx::cuda {

namespace {

constexpr int kRouteWarps = 4;  // rows per block of the routing kernel, one warp each

// One warp per row. Shared memory per warp: the exponentials [E] (double) and p [E] (float).
__global__ void moe_route_kernel(const float* logits, int64_t rows, int E, int K, bool renorm, int32_t* expert,
                                 float* weight) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = blockIdx.x * int64_t(kRouteWarps) + warp;
  if (r >= rows) return;  // whole warps leave together
  double* ex = smem + static_cast<size_t>(warp) * E;
  float* p = reinterpret_cast<float*>(smem + static_cast<size_t>(kRouteWarps) * E) + static_cast<size_t>(warp) * E;
  const float* l = logits + r * E;

  float top = -INFINITY;
  for (int i = lane; i < E; i += 32) top = fmaxf(top, l[i]);
  for (int o = 16; o > 0; o /= 2) top = fmaxf(top, __shfl_xor_sync(kFullWarpMask, top, o));
  for (int i = lane; i < E; i += 32) ex[i] = exp(static_cast<double>(l[i]) - static_cast<double>(top));
  __syncwarp();
  double sum = 0.0;
  if (lane == 0)
    for (int i = 0; i < E; ++i) sum += ex[i];  // in expert order, as the CPU
  sum = __shfl_sync(kFullWarpMask, sum, 0);
  for (int i = lane; i < E; i += 32) p[i] = static_cast<float>(ex[i] / sum);
  __syncwarp();

  // k rounds of argmax: the largest p, equal ones the lower expert (a stable descending sort's
  // first k). A chosen p is then set below every probability.
  int32_t* ex_out = expert + r * K;
  float* w_out = weight + r * K;
  for (int k = 0; k < K; ++k) {
    float best = -2.0f;
    int bi = E;
    for (int i = lane; i < E; i += 32)
      if (p[i] > best) best = p[i], bi = i;
    for (int o = 16; o > 0; o /= 2) {
      const float ob = __shfl_xor_sync(kFullWarpMask, best, o);
      const int oi = __shfl_xor_sync(kFullWarpMask, bi, o);
      if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
    }
    if (lane == 0) {
      ex_out[k] = bi;
      w_out[k] = best;
      p[bi] = -1.0f;
    }
    __syncwarp();
  }
  if (lane == 0 && renorm) {
    double chosen = 0.0;
    for (int k = 0; k < K; ++k) chosen += w_out[k];
    for (int k = 0; k < K; ++k) w_out[k] = w_out[k] / static_cast<float>(chosen);
  }
}

// One block. Thread e (striding over experts) counts, then places, expert e's slots in slot order:
// every thread reads the whole (small: rows · top_k) expert array, which keeps the sort stable with
// no atomics. Shared memory: the counts [E].
__global__ void moe_sort_kernel(const int32_t* expert, int64_t S, int K, int E, int32_t* offsets, int32_t* src_row,
                                int32_t* pos) {
  extern __shared__ int32_t start[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t c = 0;
    for (int64_t s = 0; s < S; ++s) c += expert[s] == e;
    start[e] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t run = 0;
    for (int e = 0; e < E; ++e) {
      const int32_t c = start[e];
      start[e] = run;
      offsets[e] = run;
      run += c;
    }
    offsets[E] = run;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t at = start[e];
    for (int64_t s = 0; s < S; ++s)
      if (expert[s] == e) {
        src_row[at] = static_cast<int32_t>(s / K);
        pos[s] = at++;
      }
  }
}

// One block per row, threads over H.
template <typename T>
__global__ void moe_combine_kernel(T* out, const float* y, const float* weight, const int32_t* pos, int K, int64_t H) {
  const int64_t r = blockIdx.x;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
      const int64_t s = r * K + k;
      acc = __fadd_rn(acc, __fmul_rn(weight[s], y[pos[s] * H + h]));
    }
    out[r * H + h] = from_float<T>(acc);
  }
}

}  // namespace

void invoke_moe_route(cudaStream_t stream, const float* logits, int64_t rows, int64_t experts, int64_t top_k,
                      bool renorm, int32_t* expert, float* weight) {
  if (rows <= 0) return;
  const size_t smem = static_cast<size_t>(kRouteWarps) * static_cast<size_t>(experts) * (sizeof(double) + sizeof(float));
  if (experts <= 0 || top_k < 1 || top_k > experts || smem > 96 * 1024)
    throw Error("CUDA moe_ffn: routing over " + std::to_string(experts) + " experts, top " + std::to_string(top_k) +
                ": experts must be 1 .. 2048 and top_k 1 .. experts");
  allow_dynamic_smem(moe_route_kernel, smem);
  const auto blocks = static_cast<unsigned>((rows + kRouteWarps - 1) / kRouteWarps);
  moe_route_kernel<<<blocks, 32 * kRouteWarps, smem, stream>>>(logits, rows, static_cast<int>(experts),
                                                                static_cast<int>(top_k), renorm, expert, weight);
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_moe_sort(cudaStream_t stream, const int32_t* expert, int64_t slots, int64_t top_k, int64_t experts,
                     int32_t* offsets, int32_t* src_row, int32_t* pos) {
  if (slots <= 0) return;
  const size_t smem = static_cast<size_t>(experts) * sizeof(int32_t);
  allow_dynamic_smem(moe_sort_kernel, smem);
  moe_sort_kernel<<<1, 256, smem, stream>>>(expert, slots, static_cast<int>(top_k), static_cast<int>(experts), offsets,
                                            src_row, pos);
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_moe_combine(cudaStream_t stream, void* out, ElemKind out_kind, const float* y, const float* weight,
                        const int32_t* pos, int64_t rows, int64_t top_k, int64_t H) {
  if (rows <= 0 || H <= 0) return;
  with_act_type(out_kind, "moe_ffn", [&](auto t) {
    using T = decltype(t);
    moe_combine_kernel<T><<<static_cast<unsigned>(rows), 256, 0, stream>>>(static_cast<T*>(out), y, weight, pos,
                                                                          static_cast<int>(top_k), H);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
