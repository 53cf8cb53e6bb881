#pragma once
// Software prefetch of weight rows ahead of a kernel's reads, shared by the widening GEMM
// (widening_kernels.h) and the AVX2 W8A8 product (int8_dot_kernels.h). Their blocks read a stripe
// of each row of a packed panel, and the blocks after the first read the same rows further right: a
// stride the hardware prefetcher follows at a fraction of the memory's rate. So the first block also
// fetches whole rows a few KB ahead, and the others find them in cache. prefetcht0 on x86-64 at
// every level (the compiler's builtin, no target needed); included outside any `#pragma GCC target`
// region.
#include <algorithm>
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

// The rows of the weights a kernel reads next (its next K piece or chunk), fetched toward L2 a few
// cache lines per k step of the work on the piece in cache now, so that reading the memory overlaps
// the arithmetic instead of taking turns with it. `rows` rows of `row_bytes` bytes, `stride_bytes`
// apart (one contiguous stretch when they are equal, as in a packed panel).
class SpreadPrefetch {
 public:
  SpreadPrefetch() = default;
  SpreadPrefetch(const void* first, int64_t rows, int64_t row_bytes, int64_t stride_bytes, int lines_per_step)
      : row_(static_cast<const char*>(first)), p_(row_), rows_(row_bytes > 0 ? rows : 0),
        row_bytes_(row_bytes), stride_bytes_(stride_bytes), lines_per_step_(lines_per_step) {
    if (stride_bytes_ == row_bytes_) {  // one stretch
      row_bytes_ *= rows_;
      rows_ = rows_ > 0 ? 1 : 0;
    }
  }
  // The next lines_per_step lines, until all rows are fetched.
  void step() {
    for (int i = 0; i < lines_per_step_ && rows_ > 0; ++i) {
      __builtin_prefetch(p_, 0, 2);
      p_ += 64;
      if (p_ >= row_ + row_bytes_) {
        row_ += stride_bytes_;
        p_ = row_;
        --rows_;
      }
    }
  }
 private:
  const char* row_ = nullptr;
  const char* p_ = nullptr;
  int64_t rows_ = 0, row_bytes_ = 0, stride_bytes_ = 0;
  int lines_per_step_ = 1;
};

// Lines per step that spread `bytes` over `steps` steps.
constexpr int lines_per_step(int64_t bytes, int64_t steps) {
  return steps <= 0 ? 1 : static_cast<int>(std::max<int64_t>(1, (bytes / 64 + steps - 1) / steps));
}

}  // namespace ftx::cpu
