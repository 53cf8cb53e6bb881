#pragma once
// Launch helpers shared by the kernel rooms (host side of a launch); included by the .cu files.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

#include "kernels/common/cuda_check.h"

namespace ftx::cuda {

constexpr unsigned kFullWarpMask = 0xffffffffu;

// Enough blocks of `threads` to cover n elements with grid-stride loops, capped (the loops take the
// rest) so a huge n never overflows the grid.
inline unsigned grid_for(size_t n, unsigned threads = 256) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, 65536)));
}

// Lets `kernel` use `smem` bytes of dynamic shared memory on the current device (beyond the default
// 48 KiB a kernel must opt in). The attribute is per (device, kernel) and only grows, so it is set
// once per larger size, not on every launch: cudaFuncSetAttribute is a driver call, and a decode
// step is launch-bound.
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, size_t smem) {
  if (smem <= 48 * 1024) return;
  struct Allowed {
    const void* kernel;
    int device;
    size_t bytes;
  };
  static std::mutex mutex;
  static std::vector<Allowed> allowed;  // a handful of entries: kernel instantiations x devices
  int device = 0;
  FTX_CUDA_CHECK(cudaGetDevice(&device));
  const void* key = reinterpret_cast<const void*>(kernel);
  std::lock_guard<std::mutex> lock(mutex);
  Allowed* entry = nullptr;
  for (Allowed& a : allowed)
    if (a.kernel == key && a.device == device) entry = &a;
  if (entry && smem <= entry->bytes) return;
  FTX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  if (entry)
    entry->bytes = smem;
  else
    allowed.push_back({key, device, smem});
}

}  // namespace ftx::cuda
