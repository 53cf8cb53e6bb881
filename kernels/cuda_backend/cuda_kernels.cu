// CUDA kernels of the backend except attention (cuda_attention.cu): fill/scale, fused residual +
// layernorm, bias, activations, embeddings, rotary, cache row copies. Each mirrors the CPU
// reference in lib/cpu/cpu_backend.cc formula for formula (same operand order, double where the
// CPU uses double), so the two agree to a few ulp; the only deliberate differences are summation
// order in the layernorm reductions (both in double) and FMA contraction.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/cuda_backend/cuda_elem.cuh"
#include "kernels/cuda_backend/cuda_kernels.h"

namespace ftx::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;

// Enough blocks of 256 threads to cover n elements with grid-stride loops, capped (the loops
// take the rest) so a huge n never overflows the grid.
unsigned grid_for(size_t n, unsigned threads = 256) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, 65536)));
}

__global__ void fill_kernel(float* dst, float value, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

__global__ void scale_kernel(float* x, float s, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = s == 0.0f ? 0.0f : x[i] * s;
}

// Sum over the block; every thread gets the result. blockDim.x is a multiple of 32; `red` holds 32.
__device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // `red` may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// One block per row. Pass 1 applies the residual (x += y + bias, written back) and sums; pass 2
// sums squared deviations from the mean (two-pass, as the CPU: no cancellation); pass 3 writes
// the normalised row. With `cache` the row is kept in shared memory between passes. Each thread
// touches the same indices in every pass, so out == x is safe.
__global__ void residual_layer_norm_kernel(float* x, const float* y, const float* bias, const float* gamma,
                                           const float* beta, float* out, int64_t H, float eps, bool cache) {
  extern __shared__ float row[];
  __shared__ double red[32];
  const int64_t r = blockIdx.x;
  float* xr = x + r * H;
  const float* yr = y ? y + r * H : nullptr;
  const bool add = yr || bias;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = xr[i];
    if (add) {
      // CPU order: x += (y + bias), x += y, or x += bias.
      const float t = yr ? (bias ? yr[i] + bias[i] : yr[i]) : bias[i];
      v += t;
      xr[i] = v;
    }
    if (cache) row[i] = v;
    sum += v;
  }
  if (!gamma) return;
  sum = block_sum(sum, red);
  const float mean = static_cast<float>(sum / static_cast<double>(H));
  double var = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float d = (cache ? row[i] : xr[i]) - mean;
    var += static_cast<double>(d) * d;
  }
  var = block_sum(var, red);
  const float inv = static_cast<float>(1.0 / sqrt(var / static_cast<double>(H) + static_cast<double>(eps)));
  float* o = out + r * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float v = cache ? row[i] : xr[i];
    o[i] = (v - mean) * inv * gamma[i] + (beta ? beta[i] : 0.0f);
  }
}

__global__ void add_bias_kernel(float* x, const float* bias, int64_t rows, int64_t N) {
  const size_t n = static_cast<size_t>(rows) * N;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] += bias[i % N];
}

// ftx::Activation order: kGelu, kGeluTanh, kRelu, kSilu, kSwiGlu, kGeGlu.
__device__ float activate(int act, float x) {
  switch (act) {
    case 0:
    case 5: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case 1: {
      const float k = 0.79788456080286536f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    case 2: return x > 0.0f ? x : 0.0f;
    case 3:
    case 4: return x / (1.0f + expf(-x));
  }
  return x;
}

__global__ void bias_activation_kernel(float* x, const float* bias, const float* gate, const float* gate_bias,
                                       int64_t rows, int64_t N, int act) {
  const size_t n = static_cast<size_t>(rows) * N;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t c = i % N;
    float v = activate(act, x[i] + (bias ? bias[c] : 0.0f));
    if (gate) v *= gate[i] + (gate_bias ? gate_bias[c] : 0.0f);
    x[i] = v;
  }
}

// One block per row. Sinusoidal (fairseq): [sin(pos·f_i) | cos(pos·f_i)], f_i = exp(-i·ln(1e4)/(H/2-1)),
// in double as the CPU; an odd last column gets no position term.
template <typename T>
__global__ void cast_kernel(T* dst, const float* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(src[i]);
}

// The table row is read in its stored dtype (fp32, or fp16/bf16 weights) and widened to fp32.
template <typename T>
__global__ void embedding_kernel(float* out, const T* wte, const float* wpe, int table, int64_t offset,
                                 const int32_t* ids, const int32_t* positions, int64_t H, float scale) {
  const int64_t r = blockIdx.x;
  const T* e = wte + static_cast<int64_t>(ids[r]) * H;
  const int64_t pos = static_cast<int64_t>(positions[r]) + offset;
  float* o = out + r * H;
  const int64_t half = H / 2;
  const double step = log(10000.0) / static_cast<double>(half > 1 ? half - 1 : 1);
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = to_float(e[i]) * scale;
    if (table == 1) {
      v += wpe[pos * H + i];
    } else if (table == 2 && i < 2 * half) {
      const int64_t j = i < half ? i : i - half;
      const double a = static_cast<double>(pos) * exp(-static_cast<double>(j) * step);
      v += static_cast<float>(i < half ? sin(a) : cos(a));
    }
    o[i] = v;
  }
}

// One thread per (row, pair); the angle in double as the CPU (positions reach thousands).
__global__ void rotary_kernel(float* qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads,
                              int64_t head_dim, int64_t rot_dim, bool interleaved, double base) {
  const int64_t pairs = rot_dim / 2;
  const size_t n = static_cast<size_t>(rows) * pairs;
  for (size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x; idx < n;
       idx += size_t(gridDim.x) * blockDim.x) {
    const int64_t r = static_cast<int64_t>(idx / pairs), i = static_cast<int64_t>(idx % pairs);
    const double inv_freq = pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dim));
    const double angle = static_cast<double>(positions[r]) * inv_freq;
    const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
    const int64_t a = interleaved ? 2 * i : i;
    const int64_t b = interleaved ? 2 * i + 1 : i + pairs;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = qkv + r * stride + h * head_dim;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x1 * c + x0 * s;
    }
  }
}

// blockIdx.y: the pair; x: grid-stride over the row in units of U (uint4 when rows are 16-byte
// multiples and aligned, else 2 bytes: every stored element type is a multiple of 2 bytes).
template <typename U>
__global__ void copy_rows_kernel(char* to_base, const int32_t* to_idx, const char* from_a, const char* from_b,
                                 const int32_t* from_idx, int64_t row_bytes) {
  const int64_t p = blockIdx.y;
  const int64_t to = to_idx ? to_idx[p] : p;
  const int32_t f = from_idx[p];
  const U* src = reinterpret_cast<const U*>(
      f >= 0 ? from_a + static_cast<int64_t>(f) * row_bytes
             : from_b + static_cast<int64_t>(-static_cast<int64_t>(f) - 1) * row_bytes);
  U* dst = reinterpret_cast<U*>(to_base + to * row_bytes);
  const size_t n = static_cast<size_t>(row_bytes) / sizeof(U);
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += step) dst[i] = src[i];
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void launch_fill(cudaStream_t stream, float* dst, float value, size_t n) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), 256, 0, stream>>>(dst, value, n);
  FTX_CUDA_CHECK(cudaGetLastError());
}

void launch_scale(cudaStream_t stream, float* x, float s, size_t n) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), 256, 0, stream>>>(x, s, n);
  FTX_CUDA_CHECK(cudaGetLastError());
}

void launch_residual_layer_norm(cudaStream_t stream, float* x, const float* y, const float* bias,
                                const float* gamma, const float* beta, float* out, int64_t rows, int64_t H,
                                float eps) {
  if (rows <= 0 || H <= 0 || (!y && !bias && !gamma)) return;
  // About four elements per thread, 32..512 threads (a whole number of warps, block_sum needs it).
  const int64_t want = (H + 3) / 4;
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(512, std::max<int64_t>(32, (want + 31) / 32 * 32)));
  const bool cache = gamma && H * static_cast<int64_t>(sizeof(float)) <= 32 * 1024;
  const size_t smem = cache ? static_cast<size_t>(H) * sizeof(float) : 0;
  for (int64_t r0 = 0; r0 < rows; r0 += 65535 * 16) {  // grid.x limit is 2^31-1; chunk anyway for offsets
    const int64_t n = std::min<int64_t>(rows - r0, 65535 * 16);
    residual_layer_norm_kernel<<<static_cast<unsigned>(n), threads, smem, stream>>>(
        x + r0 * H, y ? y + r0 * H : nullptr, bias, gamma, beta, out ? out + r0 * H : nullptr, H, eps, cache);
    FTX_CUDA_CHECK(cudaGetLastError());
  }
}

void launch_add_bias(cudaStream_t stream, float* x, const float* bias, int64_t rows, int64_t N) {
  if (!bias || rows <= 0 || N <= 0) return;
  add_bias_kernel<<<grid_for(static_cast<size_t>(rows) * N), 256, 0, stream>>>(x, bias, rows, N);
  FTX_CUDA_CHECK(cudaGetLastError());
}

void launch_bias_activation(cudaStream_t stream, float* x, const float* bias, const float* gate,
                            const float* gate_bias, int64_t rows, int64_t N, int act) {
  if (rows <= 0 || N <= 0) return;
  bias_activation_kernel<<<grid_for(static_cast<size_t>(rows) * N), 256, 0, stream>>>(x, bias, gate, gate_bias,
                                                                                      rows, N, act);
  FTX_CUDA_CHECK(cudaGetLastError());
}

namespace {

template <typename T>
__global__ void dequantize_int8_columns_kernel(T* dst, const int8_t* q, const float* scale, int64_t K, int64_t N) {
  const size_t total = static_cast<size_t>(K) * static_cast<size_t>(N);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(static_cast<float>(q[i]) * scale[i % static_cast<size_t>(N)]);
}

}  // namespace

void launch_dequantize_int8_columns(cudaStream_t stream, void* dst, ElemKind kind, const int8_t* q,
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

void launch_cast(cudaStream_t stream, void* dst, ElemKind kind, const float* src, size_t n) {
  if (n == 0) return;
  if (kind == ElemKind::kFp16)
    cast_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__half*>(dst), src, n);
  else if (kind == ElemKind::kBf16)
    cast_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), src, n);
  else
    throw Error("CUDA cast: the target must be fp16 or bf16");
  FTX_CUDA_CHECK(cudaGetLastError());
}

namespace {

template <typename T>
void embedding_rows(cudaStream_t stream, float* out, const T* wte, const float* wpe, int table,
                    int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows, int64_t H,
                    float scale) {
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(256, std::max<int64_t>(32, (H + 31) / 32 * 32)));
  for (int64_t r0 = 0; r0 < rows; r0 += 1 << 20) {
    const int64_t n = std::min<int64_t>(rows - r0, 1 << 20);
    embedding_kernel<T><<<static_cast<unsigned>(n), threads, 0, stream>>>(out + r0 * H, wte, wpe, table,
                                                                         position_offset, ids + r0, positions + r0, H,
                                                                         scale);
    FTX_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void launch_embedding(cudaStream_t stream, float* out, const void* wte, ElemKind wte_kind, const float* wpe,
                      int table, int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows,
                      int64_t H, float scale) {
  if (rows <= 0 || H <= 0) return;
  switch (wte_kind) {
    case ElemKind::kFp32:
      embedding_rows(stream, out, static_cast<const float*>(wte), wpe, table, position_offset, ids, positions, rows,
                     H, scale);
      break;
    case ElemKind::kFp16:
      embedding_rows(stream, out, static_cast<const __half*>(wte), wpe, table, position_offset, ids, positions, rows,
                     H, scale);
      break;
    case ElemKind::kBf16:
      embedding_rows(stream, out, static_cast<const __nv_bfloat16*>(wte), wpe, table, position_offset, ids,
                     positions, rows, H, scale);
      break;
  }
}

void launch_rotary(cudaStream_t stream, float* qkv, int64_t rows, int64_t stride, const int32_t* positions,
                   int64_t heads, int64_t head_dim, int64_t rot_dim, bool interleaved, double base) {
  if (rows <= 0 || rot_dim < 2 || heads <= 0) return;
  const size_t n = static_cast<size_t>(rows) * (rot_dim / 2);
  rotary_kernel<<<grid_for(n), 256, 0, stream>>>(qkv, rows, stride, positions, heads, head_dim, rot_dim,
                                                  interleaved, base);
  FTX_CUDA_CHECK(cudaGetLastError());
}

void launch_copy_rows(cudaStream_t stream, void* to_base, const int32_t* to_idx, const void* from_a,
                      const void* from_b, const int32_t* from_idx, int64_t pairs, int64_t row_bytes) {
  if (pairs <= 0 || row_bytes <= 0) return;
  const bool vec16 =
      row_bytes % 16 == 0 && aligned16(to_base) && aligned16(from_a) && (!from_b || aligned16(from_b));
  const size_t per_row = static_cast<size_t>(row_bytes) / (vec16 ? 16 : 2);
  const unsigned gx = static_cast<unsigned>(std::min<size_t>((per_row + 255) / 256, 1024));
  auto* to0 = static_cast<char*>(to_base);
  const auto* a = static_cast<const char*>(from_a);
  const auto* b = static_cast<const char*>(from_b);
  for (int64_t p0 = 0; p0 < pairs; p0 += 65535) {
    const int64_t n = std::min<int64_t>(pairs - p0, 65535);
    // Without to_idx, pair p goes to row p: offset the base for this chunk instead.
    char* to = to_idx ? to0 : to0 + p0 * row_bytes;
    const dim3 grid(gx, static_cast<unsigned>(n));
    if (vec16)
      copy_rows_kernel<uint4><<<grid, 256, 0, stream>>>(to, to_idx ? to_idx + p0 : nullptr, a, b, from_idx + p0,
                                                         row_bytes);
    else
      copy_rows_kernel<uint16_t><<<grid, 256, 0, stream>>>(to, to_idx ? to_idx + p0 : nullptr, a, b, from_idx + p0,
                                                            row_bytes);
    FTX_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace ftx::cuda
