#pragma once
// Software prefetch of weight rows ahead of a kernel's reads, shared by the widening GEMM
// (widening_kernels.h) and the AVX2 W8A8 product (int8_dot_kernels.h). Their blocks read a stripe
// of each row of a packed panel, and the blocks after the first read the same rows further right: a
// stride the hardware prefetcher follows at a fraction of the memory's rate. So the first block also
// fetches whole rows a few KB ahead, and the others find them in cache. prefetcht0 on x86-64 at
// every level (the compiler's builtin, no target needed); included outside any `#pragma GCC target`
// region.
#include <cstdint>

namespace ftx::cpu {

// Fetch `bytes` of the row `ahead` rows on from the one being read (bytes 0: none).
struct RowPrefetch {
  int64_t bytes = 0;
  int64_t ahead = 0;
};

// The rows in about 4 KB of rows `stride_bytes` apart: how far ahead the kernels fetch.
constexpr int64_t rows_in_4kb(int64_t stride_bytes) { return (4096 + stride_bytes - 1) / stride_bytes; }

// Every cache line of [p, p + bytes) toward L1. Never faults, so p may lie past the data.
inline void prefetch_bytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

}  // namespace ftx::cpu
