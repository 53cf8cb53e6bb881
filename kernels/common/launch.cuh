#pragma once
// Launch helpers shared by the kernel rooms. Device code only; included by the .cu files.
#include <algorithm>
#include <cstddef>

namespace ftx::cuda {

constexpr unsigned kFullWarpMask = 0xffffffffu;

// Enough blocks of `threads` to cover n elements with grid-stride loops, capped (the loops take the
// rest) so a huge n never overflows the grid.
inline unsigned grid_for(size_t n, unsigned threads = 256) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, 65536)));
}

}  // namespace ftx::cuda
