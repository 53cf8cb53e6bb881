#pragma once
// DeviceArena: a caching sub-allocator over a few large cudaMalloc blocks, so the engine's
// alloc/release pattern (weights once, workspaces at reserve(), scratch that grows) never calls
// cudaMalloc/cudaFree per step.
//
// Blocks are kBlockBytes (or one bigger block for a larger request); each keeps its free ranges in
// an offset-ordered map, allocation is best fit over all blocks, release coalesces with the free
// neighbours. Every range is 256-byte aligned (cuBLASLt's preferred alignment). Blocks are returned
// to CUDA only by the destructor, after the owner has synchronised its stream.
//
// Stream safety: the owning backend issues all its work on one stream, so memory released by the
// host and handed out again is only touched by work enqueued later on that same stream, which runs
// after the work that used it before. Not thread-safe (one backend = one host thread).
#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace ftx::cuda {

class DeviceArena {
 public:
  static constexpr size_t kAlign = 256;
  static constexpr size_t kBlockBytes = size_t(256) << 20;

  DeviceArena() = default;
  ~DeviceArena();  // cudaFree of every block; the owner synchronises first
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  void* allocate(size_t bytes);  // never null; throws ftx::Error when the device is out of memory
  void release(void* p);         // p from allocate(), or null; Error for a foreign pointer
  // Bytes asked for by the live allocation that starts at p; 0 for any other address (a pointer
  // inside an allocation, a released one, or null).
  size_t requested_bytes(const void* p) const;
  size_t bytes_in_use() const { return in_use_; }
  size_t bytes_reserved() const { return reserved_; }
  size_t blocks() const { return blocks_.size(); }
  // allocate() calls so far: a CUDA graph captured while this changed may hold addresses that
  // were released and handed out again, so it is launched once and not kept.
  uint64_t allocations() const { return allocations_; }

 private:
  struct Block {
    char* base = nullptr;
    size_t size = 0;
    std::map<size_t, size_t> free;  // offset -> length
  };
  struct Live {
    size_t block, offset, length;
    size_t requested;  // before rounding up to kAlign
  };
  void add_block(size_t bytes);

  std::vector<Block> blocks_;
  std::unordered_map<void*, Live> live_;
  size_t in_use_ = 0, reserved_ = 0;
  uint64_t allocations_ = 0;
};

}  // namespace ftx::cuda
