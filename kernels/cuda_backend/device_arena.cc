// DeviceArena: best-fit sub-allocation inside a few large cudaMalloc blocks (see device_arena.h).
#include "kernels/cuda_backend/device_arena.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"

namespace ftx::cuda {

namespace {
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

DeviceArena::~DeviceArena() {
  // No throwing from a destructor: a failing cudaFree here can only mean the context is gone.
  for (Block& b : blocks_) cudaFree(b.base);
}

void DeviceArena::add_block(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so later calls are not blamed for it
    throw Error("CUDA device memory: cannot allocate a block of " + std::to_string(bytes) + " bytes (" +
                std::to_string(in_use_) + " in use, " + std::to_string(reserved_) +
                " reserved): " + cudaGetErrorString(e));
  }
  Block b;
  b.base = static_cast<char*>(p);
  b.size = bytes;
  b.free.emplace(0, bytes);
  blocks_.push_back(std::move(b));
  reserved_ += bytes;
}

void* DeviceArena::allocate(size_t bytes) {
  ++allocations_;
  const size_t need = round_up(std::max<size_t>(bytes, 1), kAlign);
  // Best fit: the smallest free range that holds the request, over all blocks.
  size_t best_block = SIZE_MAX, best_off = 0, best_len = SIZE_MAX;
  for (size_t i = 0; i < blocks_.size(); ++i)
    for (const auto& [off, len] : blocks_[i].free)
      if (len >= need && len < best_len) {
        best_block = i;
        best_off = off;
        best_len = len;
      }
  if (best_block == SIZE_MAX) {
    add_block(std::max(kBlockBytes, round_up(need, size_t(2) << 20)));
    best_block = blocks_.size() - 1;
    best_off = 0;
    best_len = blocks_.back().size;
  }
  Block& b = blocks_[best_block];
  b.free.erase(best_off);
  if (best_len > need) b.free.emplace(best_off + need, best_len - need);
  void* p = b.base + best_off;
  live_.emplace(p, Live{best_block, best_off, need, bytes});
  in_use_ += need;
  return p;
}

size_t DeviceArena::requested_bytes(const void* p) const {
  const auto it = live_.find(const_cast<void*>(p));
  return it == live_.end() ? 0 : it->second.requested;
}

void DeviceArena::release(void* p) {
  if (!p) return;
  auto it = live_.find(p);
  if (it == live_.end()) throw Error("CUDA backend: release() of a pointer it did not allocate");
  const Live l = it->second;
  live_.erase(it);
  in_use_ -= l.length;
  auto& fr = blocks_[l.block].free;
  size_t off = l.offset, len = l.length;
  // Coalesce with the free range that ends where this one starts, and the one that starts after it.
  auto next = fr.lower_bound(off);
  if (next != fr.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      len += prev->second;
      fr.erase(prev);
    }
  }
  if (next != fr.end() && next->first == l.offset + l.length) {
    len += next->second;
    fr.erase(next);
  }
  fr.emplace(off, len);
}

}  // namespace ftx::cuda
