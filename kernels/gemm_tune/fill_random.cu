#include "kernels/gemm_tune/fill_random.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/cuda_check.h"

namespace ftx::cuda {

namespace {

__device__ float hash_to_unit(size_t i, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(i) ^ static_cast<uint32_t>(i >> 32) * 0x9E3779B9u ^ seed;
  x ^= x >> 16; x *= 0x7FEB352Du; x ^= x >> 15; x *= 0x846CA68Bu; x ^= x >> 16;
  return static_cast<float>(x) * (2.0f / 4294967296.0f) - 1.0f;
}

template <typename T>
__global__ void fill_kernel(T* data, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    data[i] = static_cast<T>(hash_to_unit(i, seed));
}

template <typename T>
void launch(void* data, size_t count, uint32_t seed, cudaStream_t stream) {
  if (count == 0) return;
  const int threads = 256;
  size_t blocks = (count + threads - 1) / threads;
  if (blocks > 4096) blocks = 4096;
  fill_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(static_cast<T*>(data), count, seed);
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void fill_random(void* data, size_t count, TuneDType dtype, bool fp32_elements, uint32_t seed, cudaStream_t stream) {
  if (fp32_elements || dtype == TuneDType::kFp32) return launch<float>(data, count, seed, stream);
  if (dtype == TuneDType::kFp16) return launch<__half>(data, count, seed, stream);
  return launch<__nv_bfloat16>(data, count, seed, stream);
}

}  // namespace ftx::cuda
