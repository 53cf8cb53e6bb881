// Sampling room: one block per sampled row, the CPU decoder's arithmetic step for step
// (lib/decoding/logit_processing.cc, sampling.cc).
//
// Order. Every selection works on 64-bit keys: the logit's bits made monotone (with -0 folded onto
// +0, which the CPU's float comparison treats as equal) in the high half and ~id in the low half,
// so a larger key is a larger logit or, on a tie, a lower id: the CPU's strict order (Descending in
// sampling.cc). Selections are radix descents on these keys, 8 bits at a time, each level a
// histogram over the block followed by one thread's walk over the 256 bins from the top.
//  * greedy: the largest key (a block max);
//  * top-k: the descent by counts finds the k-th largest key; the k keys at or above it are
//    gathered and sorted (bitonic, shared memory), then one thread draws exactly as sample_top_k:
//    w_i = exp(l_i - l_max) in double, best first, sum in that order, r = u·p·sum, subtract.
//  * top-p: the descent by probability mass finds the first key, in descending order, whose
//    inclusive prefix mass reaches u·p·total (sample_top_p's definition). Masses are
//    expf(l - max) as on the CPU, accumulated as 96-bit fixed point (2^-72 units; shared-memory
//    integer atomics, so the sums are exact and do not depend on the order threads add them):
//    the prefix sums differ from the CPU's double sums only by the CPU's own rounding, so the
//    tokens differ only when u·p·total lies within that rounding (~1e-16 relative) of a boundary.
// Log probs: log_sum_exp sums (double)expf(l - max) in a fixed order (per thread, then a shuffle
// tree), the CPU sums in index order: they agree to the float exp's ulps (~1e-7).
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include <string>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/launch.cuh"
#include "kernels/sampling/sampling_kernels.h"

namespace ftx::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kMaxK = 1024;  // FT's top-k limit (decoding::kMaxTopK)
constexpr int kBins = 256;
using u128 = unsigned __int128;

__device__ uint64_t logit_key(float x, int32_t id) {
  x = __fadd_rn(x, 0.0f);  // -0 + 0 = +0: equal floats, equal keys
  const uint32_t b = __float_as_uint(x);
  const uint32_t hi = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<uint64_t>(hi) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(id));
}
__device__ int32_t key_id(uint64_t key) { return static_cast<int32_t>(~static_cast<uint32_t>(key)); }

// A fixed-order reduction over the block (shuffle tree per warp, then over the warps); every
// thread gets the result. `red` holds 32 values; `identity`: op(identity, x) == x.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity, T* red) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullWarpMask, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `red` may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullWarpMask, v, o));
  return v;
}

struct Shared {
  uint64_t hist_hi[kBins];  // mass in units of 2^-40 (counts: 0)
  uint64_t hist_lo[kBins];  // the rest, in units of 2^-72 (counts: the count)
  uint64_t keys[kMaxK];
  double w[kMaxK];
  double red_d[32];
  uint64_t red_k[32];
  float red_f[32];
  uint64_t prefix;
  uint32_t gathered;
};

// A mass w in [0, 1] as hi · 2^-40 + lo · 2^-72 (lo < 2^32): exact for w >= 2^-49, off by < 2^-72
// below, so the sum over a vocabulary (< 2^31 terms) fits in 64-bit halves without overflow.
__device__ void fixed_point(float w, uint64_t& hi, uint64_t& lo) {
  const double scaled = static_cast<double>(w) * 0x1.0p40;
  const double whole = floor(scaled);
  hi = static_cast<uint64_t>(whole);
  lo = static_cast<uint64_t>((scaled - whole) * 0x1.0p32);
}

__device__ u128 bin_total(const Shared& s, int d) {
  return (static_cast<u128>(s.hist_hi[d]) << 32) + s.hist_lo[d];
}

// The key K* such that the weight of the keys above it is < target and with it >= target (target
// >= 1, <= the total weight). by_mass: a key weighs expf(l - max) (fixed point, 2^-72 units);
// else 1.
__device__ uint64_t radix_descent(const float* l, int64_t vocab, bool by_mass, float max, u128 target, Shared& s) {
  if (threadIdx.x == 0) s.prefix = 0;
  u128 before = 0;  // thread 0's: weight of the keys above the current prefix
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < kBins; d += blockDim.x) s.hist_hi[d] = s.hist_lo[d] = 0;
    __syncthreads();
    const uint64_t prefix = s.prefix;
    const uint64_t above = shift == 56 ? 0 : ~uint64_t(0) << (shift + 8);
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const uint64_t key = logit_key(l[i], static_cast<int32_t>(i));
      if ((key & above) != prefix) continue;
      const int d = static_cast<int>((key >> shift) & 0xff);
      if (by_mass) {
        uint64_t hi, lo;
        fixed_point(expf(__fsub_rn(l[i], max)), hi, lo);
        if (hi) atomicAdd(reinterpret_cast<unsigned long long*>(&s.hist_hi[d]), static_cast<unsigned long long>(hi));
        if (lo) atomicAdd(reinterpret_cast<unsigned long long*>(&s.hist_lo[d]), static_cast<unsigned long long>(lo));
      } else {
        atomicAdd(reinterpret_cast<unsigned long long*>(&s.hist_lo[d]), 1ull);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1, last = -1;
      for (int d = kBins - 1; d >= 0; --d) {
        const u128 m = bin_total(s, d);
        if (m == 0) continue;
        last = d;
        if (before + m >= target) {
          chosen = d;
          break;
        }
        before += m;
      }
      if (chosen < 0 && last >= 0) {  // rounding left the total short of the target: the last key
        chosen = last;                // with any weight (sample_top_p's last_positive)
        before -= bin_total(s, last);
      }
      s.prefix = prefix | (static_cast<uint64_t>(chosen < 0 ? 0 : chosen) << shift);
    }
    __syncthreads();
  }
  return s.prefix;
}

// Steps 1-4 of row_sampling.h on the row (in place). The elementwise pass does NaN and temperature
// before the bans (the CPU bans first): a banned logit ends -inf either way, since the inverse
// temperature is positive. Separate _rn intrinsics keep nvcc from fusing a multiply and a subtract
// the CPU rounds twice. Returns whether the row held a NaN or +Inf before (overflowed()'s answer).
__device__ bool process_row(float* l, int64_t vocab, const DeviceRowSampling& p, const int32_t* ids) {
  int nonfinite = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    float x = l[i];
    nonfinite |= !(x <= FLT_MAX);  // NaN or +Inf; -Inf is a ban
    if (x != x) x = -INFINITY;
    if (p.apply_temperature) x = __fmul_rn(x, p.inv_temperature);
    l[i] = x;
  }
  nonfinite = __syncthreads_or(nonfinite);
  for (int j = threadIdx.x; j < p.banned_count; j += blockDim.x) l[ids[p.banned_offset + j]] = -INFINITY;
  __syncthreads();
  for (int j = threadIdx.x; j < p.penalized_count; j += blockDim.x) {  // distinct ids: no two threads share one
    const int32_t id = ids[p.penalized_offset + j];
    float x = l[id];
    if (p.apply_repetition) x = x < 0.0f ? __fmul_rn(x, p.repetition_penalty) : __fdiv_rn(x, p.repetition_penalty);
    if (p.apply_presence) x = __fsub_rn(x, p.presence_penalty);
    if (p.apply_frequency) {
      const int32_t n = ids[p.penalized_offset + p.penalized_count + j];
      x = __fsub_rn(x, __fmul_rn(p.frequency_penalty, static_cast<float>(n)));
    }
    l[id] = x;
  }
  __syncthreads();
  if (threadIdx.x == 0 && p.min_length_id >= 0) l[p.min_length_id] = -FLT_MAX;
  __syncthreads();
  return nonfinite != 0;
}

struct MaxF {
  __device__ float operator()(float a, float b) const { return a > b ? a : b; }
};
struct MaxK {
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a > b ? a : b; }
};
struct SumD {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// log_sum_exp's sum: Σ (double)expf(l - max), -inf rows excluded by the caller.
__device__ double exp_sum(const float* l, int64_t vocab, float max, Shared& s) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) sum += static_cast<double>(expf(__fsub_rn(l[i], max)));
  return block_reduce(sum, SumD{}, 0.0, s.red_d);
}

// sample_top_k with ids from the descent (k = 1: the block max).
__device__ void draw_top_k(const float* l, int64_t vocab, const DeviceRowSampling& p, Shared& s,
                           DeviceSampledToken& out) {
  const int k = p.top_k;
  if (k == 1) {
    uint64_t best = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const uint64_t key = logit_key(l[i], static_cast<int32_t>(i));
      best = key > best ? key : best;
    }
    best = block_reduce(best, MaxK{}, uint64_t(0), s.red_k);
    if (threadIdx.x == 0) s.keys[0] = best;
  } else {
    const uint64_t kth = radix_descent(l, vocab, false, 0.0f, static_cast<u128>(k), s);
    int padded = 1;
    while (padded < k) padded <<= 1;
    if (threadIdx.x == 0) s.gathered = 0;
    for (int j = threadIdx.x; j < padded; j += blockDim.x) s.keys[j] = 0;  // below every real key
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const uint64_t key = logit_key(l[i], static_cast<int32_t>(i));
      if (key >= kth) s.keys[atomicAdd(&s.gathered, 1u)] = key;  // exactly k keys (all distinct)
    }
    __syncthreads();
    for (int size = 2; size <= padded; size <<= 1) {  // bitonic sort, descending
      for (int half = size / 2; half > 0; half >>= 1) {
        for (int i = threadIdx.x; i < padded; i += blockDim.x) {
          const int j = i ^ half;
          if (j <= i) continue;
          const bool descending = (i & size) == 0;
          const uint64_t a = s.keys[i], b = s.keys[j];
          if (descending ? a < b : a > b) {
            s.keys[i] = b;
            s.keys[j] = a;
          }
        }
        __syncthreads();
      }
    }
  }
  __syncthreads();
  const double max = l[key_id(s.keys[0])];
  if (max == -INFINITY) {  // every token banned
    if (threadIdx.x == 0) {
      out.token = key_id(s.keys[0]);
      out.log_prob = out.output_log_prob = -INFINITY;
    }
    return;
  }
  for (int j = threadIdx.x; j < k; j += blockDim.x) s.w[j] = exp(static_cast<double>(l[key_id(s.keys[j])]) - max);
  const double lse = p.log_probs ? static_cast<double>(static_cast<float>(max)) +
                                       log(exp_sum(l, vocab, static_cast<float>(max), s))
                                 : 0.0;
  __syncthreads();
  if (threadIdx.x != 0) return;
  // One thread, best first: the CPU's sums in the CPU's order.
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += s.w[j];
  double r = p.u * p.top_p * sum;
  int chosen = k - 1;
  for (int j = 0; j < k; ++j) {
    r -= s.w[j];
    if (r <= 0.0) {
      chosen = j;
      break;
    }
  }
  out.token = key_id(s.keys[chosen]);
  const double lt = l[out.token];
  out.log_prob = p.log_probs ? lt - lse : 0.0;
  out.output_log_prob = (lt - max) - log(sum);
}

// sample_top_p: the first token, in descending order, whose inclusive prefix mass reaches u·p·total.
__device__ void draw_top_p(const float* l, int64_t vocab, const DeviceRowSampling& p, Shared& s,
                           DeviceSampledToken& out) {
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) max = l[i] > max ? l[i] : max;
  max = block_reduce(max, MaxF{}, -INFINITY, s.red_f);
  if (max == -INFINITY) {
    if (threadIdx.x == 0) {
      out.token = 0;
      out.log_prob = out.output_log_prob = -INFINITY;
    }
    return;
  }
  const double total = exp_sum(l, vocab, max, s);
  // The target u·p·total from the double total (as the CPU's), in the descent's 2^-72 units:
  // scaled (2^-40 units, < 2^64 for vocab < 2^24) = hi · 2^32 + rem. At least 1, so the descent
  // never settles in a bin without mass; a target above the fixed-point total takes the last key
  // with mass (the walk's fallback).
  const double scaled = p.u * p.top_p * total * 0x1.0p40;
  const double hi = floor(scaled * 0x1.0p-32);
  const double rem = scaled - hi * 0x1.0p32;  // in [0, 2^32)
  u128 target = (static_cast<u128>(static_cast<uint64_t>(hi)) << 64) + static_cast<uint64_t>(rem * 0x1.0p32);
  if (target == 0) target = 1;
  const uint64_t key = radix_descent(l, vocab, true, max, target, s);
  if (threadIdx.x != 0) return;
  out.token = key_id(key);
  out.log_prob = out.output_log_prob = static_cast<double>(l[out.token]) - (static_cast<double>(max) + log(total));
}

__global__ void sample_rows_kernel(float* logits, int64_t stride, int64_t vocab, const DeviceRowSampling* rows,
                                   const int32_t* ids, DeviceSampledToken* out) {
  __shared__ Shared s;
  const DeviceRowSampling p = rows[blockIdx.x];
  float* l = logits + p.row * stride;
  const bool nonfinite = process_row(l, vocab, p, ids);
  DeviceSampledToken t;
  if (p.top_p_mode) {
    draw_top_p(l, vocab, p, s, t);
  } else {
    draw_top_k(l, vocab, p, s, t);
  }
  t.nonfinite = nonfinite ? 1 : 0;
  if (threadIdx.x == 0) out[blockIdx.x] = t;
}

}  // namespace

void invoke_sample_rows(cudaStream_t stream, float* logits, int64_t stride, int64_t vocab,
                        const DeviceRowSampling* rows, int64_t n, const int32_t* ids, DeviceSampledToken* out) {
  if (n == 0) return;
  // The fixed-point masses' 64-bit halves hold a vocabulary of up to 2^24 (sampling's one limit).
  if (vocab <= 0 || vocab >= (int64_t(1) << 24))
    throw Error("sample_rows: vocab " + std::to_string(vocab) + " outside [1, 2^24) (the device sampler's limit)");
  sample_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, stride, vocab, rows, ids, out);
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
