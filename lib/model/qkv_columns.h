#pragma once
// The output columns of a fused QKV matrix, [Q | K | V], and how each of the three is spread over
// TP ranks: multi-head [H | H | H] and grouped-query [n·d | g·d | g·d]
// split every segment (a rank holds its query heads and its K/V heads side by side); multi-query
// [H | d | d] splits Q and keeps the one K/V head whole on every rank. A rank's columns are the
// concatenation of its part of each segment, as the converters write QKV and its bias. Any other
// column-parallel matrix is one split segment.
//
// Used where full tensors are split or merged outside the converters (`ftx smoothquant`'s host
// model and its INT8/FP8 files, the W8A8 loader's per-tensor QKV scales), so that all of them
// agree with the layout the converters write (ft_qkv_columns_per_rank).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "lib/model/model_config.h"

namespace ftx {

struct ColumnSegment {
  int64_t width = 0;   // in the full tensor
  bool split = true;   // cut into tp equal parts (false: whole on every rank)
};

// [Q, K, V] of `cfg`'s QKV (full widths).
std::vector<ColumnSegment> qkv_column_segments(const ModelConfig& cfg);

// Columns rank-local for `tp` ranks: Σ width/tp (split) or width (whole).
int64_t rank_columns(const std::vector<ColumnSegment>& segs, int64_t tp);

// Rank r's columns of a row-major [rows, Σ width] array.
template <typename T>
std::vector<T> rank_part_of_columns(const std::vector<T>& a, int64_t rows, const std::vector<ColumnSegment>& segs,
                                    int64_t tp, int64_t r) {
  int64_t cols = 0;
  for (const ColumnSegment& s : segs) cols += s.width;
  std::vector<T> out;
  out.reserve(static_cast<size_t>(rows * rank_columns(segs, tp)));
  for (int64_t i = 0; i < rows; ++i) {
    int64_t at = i * cols;
    for (const ColumnSegment& s : segs) {
      const int64_t part = s.split ? s.width / tp : s.width;
      const auto b = a.begin() + at + (s.split ? r * part : 0);
      out.insert(out.end(), b, b + part);
      at += s.width;
    }
  }
  return out;
}

// The inverse for one rank: rank r's [rows, rank_columns] `part` written into the full [rows, Σ width]
// array `full` (a whole segment is taken from rank 0 only: every rank holds the same).
template <typename T>
void put_rank_columns(std::vector<T>& full, const T* part, int64_t rows, const std::vector<ColumnSegment>& segs,
                      int64_t tp, int64_t r) {
  int64_t cols = 0;
  for (const ColumnSegment& s : segs) cols += s.width;
  const int64_t local = rank_columns(segs, tp);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t at = i * cols, from = i * local;
    for (const ColumnSegment& s : segs) {
      const int64_t n = s.split ? s.width / tp : s.width;
      if (s.split || r == 0)
        std::copy(part + from, part + from + n, full.begin() + at + (s.split ? r * n : 0));
      at += s.width;
      from += n;
    }
  }
}

}  // namespace ftx
