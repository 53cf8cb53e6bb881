#include "lib/ops/int8_columns.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/error.h"

namespace ftx::ops {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

void check_int8_columns(const Int8Columns& m, const std::string& origin) {
  FTX_CHECK(m.rows > 0 && m.cols > 0 && m.values.size() == static_cast<size_t>(m.rows * m.cols) &&
                m.scales.size() == static_cast<size_t>(m.cols),
            origin,
            "INT8 matrix [" + num(m.rows) + ", " + num(m.cols) + "] holds " + num(static_cast<int64_t>(m.values.size())) +
                " values and " + num(static_cast<int64_t>(m.scales.size())) + " column scales");
  for (int64_t n = 0; n < m.cols; ++n)
    FTX_CHECK(std::isfinite(m.scales[static_cast<size_t>(n)]), origin,
              "INT8 column " + num(n) + "'s scale is " + std::to_string(m.scales[static_cast<size_t>(n)]));
}

Int8Columns int8_columns(const Int8Columns& m, int64_t first, int64_t n, const std::string& origin) {
  FTX_CHECK(n > 0 && first >= 0 && first + n <= m.cols, origin,
            "INT8 columns [" + num(first) + ", " + num(first + n) + ") of " + num(m.cols));
  Int8Columns out;
  out.rows = m.rows;
  out.cols = n;
  out.values.resize(static_cast<size_t>(m.rows * n));
  for (int64_t k = 0; k < m.rows; ++k)
    std::memcpy(&out.values[static_cast<size_t>(k * n)], &m.values[static_cast<size_t>(k * m.cols + first)],
                static_cast<size_t>(n));
  out.scales.assign(m.scales.begin() + first, m.scales.begin() + first + n);
  return out;
}

Int8Columns int8_rows(const Int8Columns& m, int64_t first, int64_t n, const std::string& origin) {
  FTX_CHECK(n > 0 && first >= 0 && first + n <= m.rows, origin,
            "INT8 rows [" + num(first) + ", " + num(first + n) + ") of " + num(m.rows));
  Int8Columns out;
  out.rows = n;
  out.cols = m.cols;
  out.values.assign(m.values.begin() + static_cast<std::ptrdiff_t>(first * m.cols),
                    m.values.begin() + static_cast<std::ptrdiff_t>((first + n) * m.cols));
  out.scales = m.scales;  // one scale per column spans every row, so each rank's slice keeps it
  return out;
}

Int8Columns int8_concat_columns(const std::vector<const Int8Columns*>& parts, const std::string& origin) {
  FTX_CHECK(!parts.empty(), origin, "no INT8 matrices to join");
  Int8Columns out;
  out.rows = parts.front()->rows;
  for (const Int8Columns* p : parts) {
    FTX_CHECK(p->rows == out.rows, origin,
              "INT8 projections fused into one GEMM have " + num(p->rows) + " and " + num(out.rows) + " input rows");
    out.cols += p->cols;
  }
  out.values.resize(static_cast<size_t>(out.rows * out.cols));
  int64_t c0 = 0;
  for (const Int8Columns* p : parts) {
    for (int64_t k = 0; k < p->rows; ++k)
      std::memcpy(&out.values[static_cast<size_t>(k * out.cols + c0)], &p->values[static_cast<size_t>(k * p->cols)],
                  static_cast<size_t>(p->cols));
    out.scales.insert(out.scales.end(), p->scales.begin(), p->scales.end());
    c0 += p->cols;
  }
  return out;
}

}  // namespace ftx::ops
