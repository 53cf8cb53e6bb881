#pragma once
// How much memory the paged KV cache takes on each rank (generate's and chat's --kv-cache-memory):
//  * auto: enough blocks for every cache row to hold the longest sequence asked of it (what the
//    row-allocated cache took), grown as rows and lengths grow; nothing is ever preempted;
//  * bytes (1073741824, 512M, 2G; K/M/G/T are powers of 1024): a fixed pool of that many bytes;
//  * a fraction in (0, 1]: of the memory the backend can still allocate when the engine is made
//    (after the weights, before the workspaces), as vLLM's gpu_memory_utilization.
// With a fixed pool the scheduler admits a request when its blocks fit and preempts the newest
// request (to recompute it later) when a step would run out.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ftx::kv {

struct KvCacheBudget {
  enum class Kind { kAuto, kBytes, kFraction };
  Kind kind = Kind::kAuto;
  double value = 0.0;  // bytes or fraction

  bool fixed() const { return kind != Kind::kAuto; }
  // Blocks of block_bytes a fixed budget holds, given the backend's available memory.
  int64_t blocks(int64_t block_bytes, size_t available) const;
  std::string describe() const;  // "auto", "2.00 GiB", "0.9 of the available memory"
  // "auto", a byte count with an optional K/M/G/T suffix, or a fraction in (0, 1]. UsageError
  // naming `flag` and the value otherwise.
  static KvCacheBudget parse(const std::string& text, const std::string& flag = "--kv-cache-memory");
};

}  // namespace ftx::kv
