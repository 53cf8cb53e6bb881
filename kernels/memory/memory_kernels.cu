// Memory room: fill, scale, conversions between fp32, fp16 and bf16, cache row copies.
// Each kernel mirrors the CPU reference in lib/cpu/cpu_backend.cc formula for formula (same operand
// order, double where the CPU uses double), so the two agree to a few ulp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/memory/memory_kernels.h"

namespace ftx::cuda {

namespace {

__global__ void fill_kernel(float* dst, float value, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <typename T>
__global__ void scale_kernel(T* x, float s, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(s == 0.0f ? 0.0f : to_float(x[i]) * s);
}

// blockIdx.y: the pair; x: grid-stride over the row in units of U, the widest of 16, 8, 4, 2 and 1
// bytes that divides the row and every base address (an int8 cache row can be odd bytes long).
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

// The widest copy unit (16, 8, 4, 2 or 1 bytes) that divides row_bytes and aligns every base.
int copy_unit(int64_t row_bytes, std::initializer_list<const void*> bases) {
  uintptr_t bits = static_cast<uintptr_t>(row_bytes);
  for (const void* p : bases) bits |= reinterpret_cast<uintptr_t>(p);
  for (int u : {16, 8, 4, 2})
    if ((bits & static_cast<uintptr_t>(u - 1)) == 0) return u;
  return 1;
}

template <typename U>
void launch_copy_rows(cudaStream_t stream, const dim3& grid, char* to, const int32_t* to_idx, const char* a,
                      const char* b, const int32_t* from_idx, int64_t row_bytes) {
  copy_rows_kernel<U><<<grid, 256, 0, stream>>>(to, to_idx, a, b, from_idx, row_bytes);
}

template <typename To, typename From>
__global__ void convert_kernel(To* dst, const From* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = from_float<To>(to_float(src[i]));
}

}  // namespace

void invoke_fill(cudaStream_t stream, float* dst, float value, size_t n) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), 256, 0, stream>>>(dst, value, n);
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_scale(cudaStream_t stream, void* x, ElemKind kind, float s, size_t n) {
  if (n == 0) return;
  with_act_type(kind, "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid_for(n), 256, 0, stream>>>(static_cast<T*>(x), s, n);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_convert(cudaStream_t stream, void* dst, ElemKind to, const void* src, ElemKind from, size_t n) {
  if (n == 0) return;
  with_act_type(to, "convert", [&](auto to_tag) {
    using To = decltype(to_tag);
    with_act_type(from, "convert", [&](auto from_tag) {
      using From = decltype(from_tag);
      convert_kernel<To, From><<<grid_for(n), 256, 0, stream>>>(static_cast<To*>(dst), static_cast<const From*>(src),
                                                                n);
    });
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

void invoke_copy_rows(cudaStream_t stream, void* to_base, const int32_t* to_idx, const void* from_a,
                      const void* from_b, const int32_t* from_idx, int64_t pairs, int64_t row_bytes) {
  if (pairs <= 0 || row_bytes <= 0) return;
  const int unit = from_b ? copy_unit(row_bytes, {to_base, from_a, from_b}) : copy_unit(row_bytes, {to_base, from_a});
  const size_t per_row = static_cast<size_t>(row_bytes) / static_cast<size_t>(unit);
  const unsigned gx = static_cast<unsigned>(std::min<size_t>((per_row + 255) / 256, 1024));
  auto* to0 = static_cast<char*>(to_base);
  const auto* a = static_cast<const char*>(from_a);
  const auto* b = static_cast<const char*>(from_b);
  for (int64_t p0 = 0; p0 < pairs; p0 += 65535) {
    const int64_t n = std::min<int64_t>(pairs - p0, 65535);
    // Without to_idx, pair p goes to row p: offset the base for this chunk instead.
    char* to = to_idx ? to0 : to0 + p0 * row_bytes;
    const int32_t* ti = to_idx ? to_idx + p0 : nullptr;
    const dim3 grid(gx, static_cast<unsigned>(n));
    switch (unit) {
      case 16: launch_copy_rows<uint4>(stream, grid, to, ti, a, b, from_idx + p0, row_bytes); break;
      case 8: launch_copy_rows<uint2>(stream, grid, to, ti, a, b, from_idx + p0, row_bytes); break;
      case 4: launch_copy_rows<uint32_t>(stream, grid, to, ti, a, b, from_idx + p0, row_bytes); break;
      case 2: launch_copy_rows<uint16_t>(stream, grid, to, ti, a, b, from_idx + p0, row_bytes); break;
      default: launch_copy_rows<uint8_t>(stream, grid, to, ti, a, b, from_idx + p0, row_bytes); break;
    }
    FTX_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace ftx::cuda
