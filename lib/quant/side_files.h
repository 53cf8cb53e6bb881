#pragma once
// Building blocks of the quantised side files `ftx smoothquant` writes beside the weights (INT8:
// int8_export.h, FP8: fp8_export.h): a file's bytes, a full GEMM tensor's part for one TP rank, and
// a weight's values as the output folder stores them.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/convert/conversion.h"
#include "lib/model/qkv_columns.h"
#include "lib/quant/host_model.h"

namespace ftx::quant {

// The side file `name` (rank -1: written once, without a rank suffix) holding `values`.
template <typename T>
SideTensor make_side_file(const std::string& name, int64_t rank, std::vector<int64_t> shape, DType dtype,
                          const std::vector<T>& values) {
  SideTensor f;
  f.file = FtWeightFile{name, rank, std::move(shape), false};
  f.dtype = dtype;
  FTX_CHECK(static_cast<int64_t>(values.size()) == f.file.numel(), "", "quantised export: size of " + name);
  f.bytes.resize(values.size() * sizeof(T));
  std::memcpy(f.bytes.data(), values.data(), f.bytes.size());
  return f;
}

// How one layer GEMM's full [rows, cols] weight, and the per-column vectors beside it, are spread
// over TP ranks, as the weight's own files are: row-parallel GEMMs (attention.dense, FC2) by rows,
// column-parallel ones by their column segments (QKV per Q/K/V, qkv_columns.h).
struct GemmSplit {
  int64_t rows = 0, cols = 0;
  bool by_rows = false;
  std::vector<ColumnSegment> segs;  // column-parallel: the last axis's segments

  std::vector<int64_t> rank_shape(int64_t tp) const {
    return by_rows ? std::vector<int64_t>{rows / tp, cols} : std::vector<int64_t>{rows, rank_columns(segs, tp)};
  }
  // Rank r's part of the [rows, cols] matrix `a`.
  template <typename T>
  std::vector<T> part(const std::vector<T>& a, int64_t tp, int64_t r) const {
    if (!by_rows) return rank_part_of_columns(a, rows, segs, tp, r);
    const int64_t n = rows / tp;
    return std::vector<T>(a.begin() + r * n * cols, a.begin() + (r + 1) * n * cols);
  }
  // Rank r's part of a [cols] vector (column-parallel GEMMs only).
  template <typename T>
  std::vector<T> column_part(const std::vector<T>& v, int64_t tp, int64_t r) const {
    return rank_part_of_columns(v, 1, segs, tp, r);
  }
};

// The split of GEMM `base` ("model.layers.L.<gemm>", its weight in `model`).
GemmSplit gemm_split(const HostModel& model, const std::string& base);

// The weight as it is stored: rounded to the output dtype (fp32, fp16 or bf16), as fp32 values.
std::vector<float> stored_values(const HostTensor& w, DType storage);

}  // namespace ftx::quant
