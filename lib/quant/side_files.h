#pragma once
// Building blocks of the quantised side files `ftx smoothquant` writes beside the weights (INT8:
// int8_export.h, FP8: fp8_export.h): a file's bytes, a full tensor's part for one TP rank, and a
// weight's values as the output folder stores them.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/convert/conversion.h"
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

// Rank r's part of a [rows, cols] row-major array: rows split (axis 0) or every one of `segs`
// equal last-axis segments split (column-parallel; QKV has 3 segments).
template <typename T>
std::vector<T> split_part(const std::vector<T>& a, int64_t rows, int64_t cols, bool by_rows, int64_t segs,
                          int64_t tp, int64_t r) {
  std::vector<T> out;
  if (by_rows) {
    const int64_t n = rows / tp;
    out.assign(a.begin() + r * n * cols, a.begin() + (r + 1) * n * cols);
    return out;
  }
  const int64_t seg = cols / segs, part = seg / tp;
  out.reserve(static_cast<size_t>(rows * cols / tp));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t s = 0; s < segs; ++s) {
      const auto b = a.begin() + i * cols + s * seg + r * part;
      out.insert(out.end(), b, b + part);
    }
  return out;
}

// Rank r's part of a multi-query QKV [rows, H + 2d]: its H/tp query columns, then K and V whole.
template <typename T>
std::vector<T> split_multi_query(const std::vector<T>& a, int64_t rows, int64_t cols, int64_t d, int64_t tp,
                                 int64_t r) {
  const int64_t q = (cols - 2 * d) / tp;
  std::vector<T> out;
  out.reserve(static_cast<size_t>(rows * (q + 2 * d)));
  for (int64_t i = 0; i < rows; ++i) {
    const auto row = a.begin() + i * cols;
    out.insert(out.end(), row + r * q, row + (r + 1) * q);
    out.insert(out.end(), row + cols - 2 * d, row + cols);
  }
  return out;
}

// The weight as it is stored: rounded to the output dtype (fp32, fp16 or bf16), as fp32 values.
std::vector<float> stored_values(const HostTensor& w, DType storage);

}  // namespace ftx::quant
