#include "kernels/quantization/int4_layout.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ftx::cuda {

Int4DeviceLayout make_int4_layout(const ops::Int4Matrix& m, const std::string& origin) {
  ops::check_int4(m, origin);
  Int4DeviceLayout l;
  l.rows = m.rows;
  l.cols = m.cols;
  l.cols_padded = (m.cols + kInt4ColumnAlign - 1) / kInt4ColumnAlign * kInt4ColumnAlign;
  l.groups = m.groups;
  const size_t pad = static_cast<size_t>(l.cols_padded);
  std::vector<int32_t> order(static_cast<size_t>(m.rows));
  std::iota(order.begin(), order.end(), 0);
  if (m.group_index.empty()) {
    l.group_size = m.group_size;
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
      return m.group_index[static_cast<size_t>(x)] < m.group_index[static_cast<size_t>(y)];
    });
    l.perm = order;
    l.row_group.resize(order.size());
    for (size_t k = 0; k < order.size(); ++k) l.row_group[k] = m.group_index[static_cast<size_t>(order[k])];
  }
  l.packed.assign(static_cast<size_t>(m.rows) * pad / 2, 0);
  for (int64_t k = 0; k < m.rows; ++k) {
    const uint8_t* src =
        m.packed.data() + static_cast<size_t>(order[static_cast<size_t>(k)]) * static_cast<size_t>(m.cols / 2);
    std::copy(src, src + m.cols / 2, l.packed.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(k) * pad / 2));
  }
  l.scales.assign(static_cast<size_t>(m.groups) * pad, 0.0f);
  if (!m.symmetric()) l.zeros.assign(static_cast<size_t>(m.groups) * pad, 8);
  for (int64_t g = 0; g < m.groups; ++g) {
    const size_t from = static_cast<size_t>(g * m.cols), to = static_cast<size_t>(g) * pad;
    std::copy(m.scales.begin() + static_cast<ptrdiff_t>(from), m.scales.begin() + static_cast<ptrdiff_t>(from + m.cols),
              l.scales.begin() + static_cast<ptrdiff_t>(to));
    if (!m.symmetric())
      std::copy(m.zeros.begin() + static_cast<ptrdiff_t>(from), m.zeros.begin() + static_cast<ptrdiff_t>(from + m.cols),
                l.zeros.begin() + static_cast<ptrdiff_t>(to));
  }
  return l;
}

void int4_gemm_twin(const Int4DeviceLayout& l, int64_t M, const float* a, float* c, float beta) {
  const size_t pad = static_cast<size_t>(l.cols_padded);
  std::vector<float> acc(kInt4Slices);
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * l.rows;
    for (int64_t n = 0; n < l.cols; ++n) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = 0; k < l.rows; ++k) {
        const int slice = static_cast<int>((k % kInt4StepRows) / kInt4SliceRows);
        const int64_t g = l.row_group.empty() ? k / l.group_size : l.row_group[static_cast<size_t>(k)];
        const uint8_t b = l.packed[static_cast<size_t>(k) * pad / 2 + static_cast<size_t>(n / 2)];
        const float u = static_cast<float>((n & 1) ? (b >> 4) : (b & 0xF));
        const float z =
            l.zeros.empty() ? 8.0f : static_cast<float>(l.zeros[static_cast<size_t>(g) * pad + static_cast<size_t>(n)]);
        const float w = (u - z) * l.scales[static_cast<size_t>(g) * pad + static_cast<size_t>(n)];
        const float x = row[l.perm.empty() ? k : l.perm[static_cast<size_t>(k)]];
        acc[static_cast<size_t>(slice)] = std::fma(x, w, acc[static_cast<size_t>(slice)]);
      }
      float sum = acc[0];
      for (int s = 1; s < kInt4Slices; ++s) sum += acc[static_cast<size_t>(s)];
      float& out = c[m * l.cols + n];
      out = beta != 0.0f ? std::fma(beta, out, sum) : sum;
    }
  }
}

}  // namespace ftx::cuda
