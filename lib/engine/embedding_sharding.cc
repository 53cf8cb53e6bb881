#include "lib/engine/embedding_sharding.h"

#include <algorithm>
#include <cstring>

namespace ftx {

int64_t vocab_rows_per_rank(int64_t vocab, int tp, int64_t pad) {
  pad = std::max<int64_t>(1, pad);
  const int64_t rows = (vocab + tp - 1) / tp;
  return (rows + pad - 1) / pad * pad;
}

std::vector<uint8_t> table_rows(const uint8_t* src, int64_t total_rows, int64_t cols, size_t elem, int64_t first,
                                int64_t rows) {
  const size_t row_bytes = static_cast<size_t>(cols) * elem;
  std::vector<uint8_t> out(static_cast<size_t>(rows) * row_bytes, 0);
  const int64_t have = std::clamp<int64_t>(total_rows - first, 0, rows);
  if (have > 0) std::memcpy(out.data(), src + static_cast<size_t>(first) * row_bytes, static_cast<size_t>(have) * row_bytes);
  return out;
}

std::vector<uint8_t> table_columns(const uint8_t* src, int64_t rows, int64_t total_cols, size_t elem, int64_t first,
                                   int64_t cols) {
  const size_t in_row = static_cast<size_t>(total_cols) * elem, out_row = static_cast<size_t>(cols) * elem;
  std::vector<uint8_t> out(static_cast<size_t>(rows) * out_row);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + static_cast<size_t>(r) * out_row, src + static_cast<size_t>(r) * in_row + static_cast<size_t>(first) * elem,
                out_row);
  return out;
}

}  // namespace ftx
