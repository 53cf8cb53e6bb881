#include "lib/ops/int4_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/error.h"
#include "lib/ops/host_math.h"

namespace ftx::ops {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

void set_nibble(Int4Matrix& m, int64_t k, int64_t n, uint8_t u) {
  uint8_t& b = m.packed[static_cast<size_t>(k * (m.cols / 2) + n / 2)];
  b = (n & 1) ? static_cast<uint8_t>((b & 0x0F) | (u << 4)) : static_cast<uint8_t>((b & 0xF0) | u);
}

Int4Matrix empty_like(const Int4Matrix& m, int64_t rows, int64_t cols, int64_t groups, bool with_zeros) {
  Int4Matrix out;
  out.rows = rows;
  out.cols = cols;
  out.group_size = m.group_size;
  out.groups = groups;
  out.packed.assign(static_cast<size_t>(rows * (cols / 2)), 0);
  out.scales.assign(static_cast<size_t>(groups * cols), 0.0f);
  if (with_zeros) out.zeros.assign(static_cast<size_t>(groups * cols), 8);
  return out;
}

}  // namespace

void check_int4(const Int4Matrix& m, const std::string& origin) {
  FTX_CHECK(m.rows > 0 && m.cols > 0, origin, "an INT4 matrix of " + num(m.rows) + " x " + num(m.cols));
  FTX_CHECK(m.cols % 2 == 0, origin, "an INT4 matrix needs an even number of columns (two per byte), not " + num(m.cols));
  FTX_CHECK(m.groups > 0, origin, "an INT4 matrix with " + num(m.groups) + " groups");
  if (m.group_index.empty()) {
    FTX_CHECK(m.group_size > 0 && m.groups == (m.rows + m.group_size - 1) / m.group_size, origin,
              "INT4 group size " + num(m.group_size) + " gives " + num((m.rows + std::max<int64_t>(m.group_size, 1) - 1) /
                                                                      std::max<int64_t>(m.group_size, 1)) +
                  " groups over " + num(m.rows) + " rows, not " + num(m.groups));
  } else {
    FTX_CHECK(static_cast<int64_t>(m.group_index.size()) == m.rows, origin,
              "INT4 group index of " + num(static_cast<int64_t>(m.group_index.size())) + " entries for " + num(m.rows) +
                  " rows");
    for (int32_t g : m.group_index)
      FTX_CHECK(g >= 0 && g < m.groups, origin, "INT4 group index " + num(g) + " outside [0, " + num(m.groups) + ")");
  }
  FTX_CHECK(static_cast<int64_t>(m.packed.size()) == m.rows * (m.cols / 2), origin,
            "INT4 values of " + num(static_cast<int64_t>(m.packed.size())) + " bytes for " + num(m.rows) + " x " +
                num(m.cols));
  FTX_CHECK(static_cast<int64_t>(m.scales.size()) == m.groups * m.cols, origin,
            "INT4 scales of " + num(static_cast<int64_t>(m.scales.size())) + " values for " + num(m.groups) +
                " groups x " + num(m.cols));
  FTX_CHECK(m.zeros.empty() || static_cast<int64_t>(m.zeros.size()) == m.groups * m.cols, origin,
            "INT4 zero points of " + num(static_cast<int64_t>(m.zeros.size())) + " values for " + num(m.groups) +
                " groups x " + num(m.cols));
  for (float s : m.scales) FTX_CHECK(std::isfinite(s), origin, "an INT4 scale that is not finite");
}

Int4Matrix quantize_int4(const void* src, DType src_dtype, int64_t rows, int64_t cols, int64_t group_size,
                         bool zero_points) {
  if (cols % 2 != 0) throw Error("INT4 quantisation needs an even number of columns, not " + num(cols));
  std::vector<float> w(static_cast<size_t>(rows * cols));
  convert_weight(src, src_dtype, w.data(), DType::kFloat32, w.size());
  const int64_t gs = group_size <= 0 || group_size >= rows ? rows : group_size;
  Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group_size = gs;
  m.groups = (rows + gs - 1) / gs;
  m.packed.assign(static_cast<size_t>(rows * (cols / 2)), 0);
  m.scales.assign(static_cast<size_t>(m.groups * cols), 1.0f);
  if (zero_points) m.zeros.assign(static_cast<size_t>(m.groups * cols), 0);
  for (int64_t g = 0; g < m.groups; ++g) {
    const int64_t k0 = g * gs, k1 = std::min(rows, k0 + gs);
    for (int64_t n = 0; n < cols; ++n) {
      float lo = 0.0f, hi = 0.0f, amax = 0.0f;
      for (int64_t k = k0; k < k1; ++k) {
        const float x = w[static_cast<size_t>(k * cols + n)];
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        amax = std::max(amax, std::fabs(x));
      }
      const size_t gi = static_cast<size_t>(g * cols + n);
      if (zero_points) {
        const float s = hi - lo > 0.0f ? (hi - lo) / 15.0f : 1.0f;
        const float z = std::min(15.0f, std::max(0.0f, std::round(-lo / s)));
        m.scales[gi] = s;
        m.zeros[gi] = static_cast<uint8_t>(z);
        for (int64_t k = k0; k < k1; ++k) {
          const float u = std::round(w[static_cast<size_t>(k * cols + n)] / s) + z;
          set_nibble(m, k, n, static_cast<uint8_t>(std::min(15.0f, std::max(0.0f, u))));
        }
      } else {
        const float s = amax > 0.0f ? amax / 8.0f : 1.0f;
        m.scales[gi] = s;
        for (int64_t k = k0; k < k1; ++k) {
          const float q = std::min(7.0f, std::max(-8.0f, std::round(w[static_cast<size_t>(k * cols + n)] / s)));
          set_nibble(m, k, n, static_cast<uint8_t>(q + 8.0f));
        }
      }
    }
  }
  return m;
}

std::vector<double> dequantize_int4(const Int4Matrix& m) {
  std::vector<double> out(static_cast<size_t>(m.rows * m.cols));
  for (int64_t k = 0; k < m.rows; ++k) {
    const int64_t g = m.group_of(k);
    for (int64_t n = 0; n < m.cols; ++n)
      out[static_cast<size_t>(k * m.cols + n)] =
          static_cast<double>(static_cast<int>(m.nibble(k, n)) - m.zero(g, n)) * static_cast<double>(m.scale(g, n));
  }
  return out;
}

Int4Matrix int4_columns(const Int4Matrix& m, int64_t c0, int64_t nc, const std::string& origin) {
  FTX_CHECK(c0 % 2 == 0 && nc % 2 == 0 && nc > 0 && c0 >= 0 && c0 + nc <= m.cols, origin,
            "INT4 columns [" + num(c0) + ", " + num(c0 + nc) + ") of " + num(m.cols) +
                " (a split of packed 4-bit columns must start and end at an even column)");
  Int4Matrix out = empty_like(m, m.rows, nc, m.groups, !m.symmetric());
  out.group_index = m.group_index;
  for (int64_t k = 0; k < m.rows; ++k)
    std::memcpy(&out.packed[static_cast<size_t>(k * (nc / 2))], &m.packed[static_cast<size_t>(k * (m.cols / 2) + c0 / 2)],
                static_cast<size_t>(nc / 2));
  for (int64_t g = 0; g < m.groups; ++g) {
    std::memcpy(&out.scales[static_cast<size_t>(g * nc)], &m.scales[static_cast<size_t>(g * m.cols + c0)],
                static_cast<size_t>(nc) * sizeof(float));
    if (!m.symmetric())
      std::memcpy(&out.zeros[static_cast<size_t>(g * nc)], &m.zeros[static_cast<size_t>(g * m.cols + c0)],
                  static_cast<size_t>(nc));
  }
  return out;
}

Int4Matrix int4_rows(const Int4Matrix& m, int64_t r0, int64_t nr, const std::string& origin) {
  FTX_CHECK(nr > 0 && r0 >= 0 && r0 + nr <= m.rows, origin,
            "INT4 rows [" + num(r0) + ", " + num(r0 + nr) + ") of " + num(m.rows));
  const size_t row_bytes = static_cast<size_t>(m.cols / 2);
  if (!m.group_index.empty()) {
    Int4Matrix out = m;
    out.rows = nr;
    out.packed.assign(m.packed.begin() + static_cast<std::ptrdiff_t>(r0 * row_bytes),
                      m.packed.begin() + static_cast<std::ptrdiff_t>((r0 + nr) * row_bytes));
    out.group_index.assign(m.group_index.begin() + r0, m.group_index.begin() + r0 + nr);
    return out;
  }
  if (m.groups == 1) {  // one group per column (per channel): every slice of the rows keeps its scales
    Int4Matrix out = m;
    out.rows = nr;
    out.group_size = nr;
    out.packed.assign(m.packed.begin() + static_cast<std::ptrdiff_t>(r0 * row_bytes),
                      m.packed.begin() + static_cast<std::ptrdiff_t>((r0 + nr) * row_bytes));
    return out;
  }
  FTX_CHECK(r0 % m.group_size == 0 && (nr % m.group_size == 0 || r0 + nr == m.rows), origin,
            "INT4 rows [" + num(r0) + ", " + num(r0 + nr) + ") split a group of " + num(m.group_size) +
                " rows across tensor-parallel ranks (choose a TP size that divides the input dimension into whole groups)");
  const int64_t g0 = r0 / m.group_size, ng = (nr + m.group_size - 1) / m.group_size;
  Int4Matrix out = empty_like(m, nr, m.cols, ng, !m.symmetric());
  std::memcpy(out.packed.data(), &m.packed[static_cast<size_t>(r0) * row_bytes], static_cast<size_t>(nr) * row_bytes);
  std::memcpy(out.scales.data(), &m.scales[static_cast<size_t>(g0 * m.cols)],
              static_cast<size_t>(ng * m.cols) * sizeof(float));
  if (!m.symmetric())
    std::memcpy(out.zeros.data(), &m.zeros[static_cast<size_t>(g0 * m.cols)], static_cast<size_t>(ng * m.cols));
  return out;
}

Int4Matrix int4_concat_columns(const std::vector<const Int4Matrix*>& parts, const std::string& origin) {
  FTX_CHECK(!parts.empty(), origin, "no INT4 matrices to join");
  const Int4Matrix& first = *parts.front();
  int64_t cols = 0;
  bool any_zeros = false;
  for (const Int4Matrix* p : parts) {
    FTX_CHECK(p->rows == first.rows && p->groups == first.groups && p->group_size == first.group_size &&
                  p->group_index == first.group_index,
              origin,
              "INT4 projections fused into one GEMM have different grouping (rows " + num(p->rows) + " vs " +
                  num(first.rows) + ", groups " + num(p->groups) + " vs " + num(first.groups) +
                  (p->group_index != first.group_index ? ", different g_idx" : "") + ")");
    FTX_CHECK(p->cols % 2 == 0, origin, "an INT4 part of " + num(p->cols) + " columns (odd)");
    cols += p->cols;
    any_zeros = any_zeros || !p->symmetric();
  }
  Int4Matrix out = empty_like(first, first.rows, cols, first.groups, any_zeros);
  out.group_index = first.group_index;
  int64_t c0 = 0;
  for (const Int4Matrix* p : parts) {
    for (int64_t k = 0; k < p->rows; ++k)
      std::memcpy(&out.packed[static_cast<size_t>(k * (cols / 2) + c0 / 2)], &p->packed[static_cast<size_t>(k * (p->cols / 2))],
                  static_cast<size_t>(p->cols / 2));
    for (int64_t g = 0; g < p->groups; ++g) {
      std::memcpy(&out.scales[static_cast<size_t>(g * cols + c0)], &p->scales[static_cast<size_t>(g * p->cols)],
                  static_cast<size_t>(p->cols) * sizeof(float));
      if (!p->symmetric())  // a symmetric part keeps the 8 empty_like filled in
        std::memcpy(&out.zeros[static_cast<size_t>(g * cols + c0)], &p->zeros[static_cast<size_t>(g * p->cols)],
                    static_cast<size_t>(p->cols));
    }
    c0 += p->cols;
  }
  return out;
}

}  // namespace ftx::ops
