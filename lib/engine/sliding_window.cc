#include "lib/engine/sliding_window.h"

#include <algorithm>

namespace ftx {

int64_t first_position_beyond_window(int64_t window, int64_t memory_len, int64_t first, int64_t last) {
  if (window <= 0 || (memory_len > 0 && memory_len <= window) || last < window) return -1;
  return std::max(first, window);
}

std::string beyond_window_message(int64_t position, int64_t window) {
  const std::string w = std::to_string(window);
  return "position " + std::to_string(position) + " is beyond the model's sliding attention window (config.ini " +
         "sliding_window = " + w + "); run with --memory-len " + w + " to attend to exactly the last " + w +
         " positions, as the model does";
}

}  // namespace ftx
