#include "lib/cpu/int4_gemm.h"

#include <algorithm>
#include <vector>

#include "formats/error.h"
#include "lib/cpu/half_rounding.h"

namespace ftx::cpu {

namespace {

// The kernel rows of m: each group's rows in order, groups in order, each run padded to 8 (-1).
void kernel_rows_of(const ops::Int4Matrix& m, std::vector<int32_t>& source, std::vector<int64_t>& start,
                    std::vector<int32_t>& id) {
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(m.groups));
  for (int64_t k = 0; k < m.rows; ++k) rows[static_cast<size_t>(m.group_of(k))].push_back(static_cast<int32_t>(k));
  source.clear();
  start.assign(1, 0);
  id.clear();
  for (int64_t g = 0; g < m.groups; ++g) {
    const auto& r = rows[static_cast<size_t>(g)];
    if (r.empty()) continue;  // a tensor-parallel slice of act-order rows need not touch every group
    source.insert(source.end(), r.begin(), r.end());
    while (source.size() % 8 != 0) source.push_back(-1);
    start.push_back(static_cast<int64_t>(source.size()));
    id.push_back(static_cast<int32_t>(g));
  }
}

// Nibble t of a word as the vector kernels read it: u·16^t (t < 7), u (t = 7).
inline float nibble(uint32_t word, int t) {
  return t == 7 ? static_cast<float>(word >> 28) : static_cast<float>(static_cast<int32_t>(word & (0xFu << (4 * t))));
}

// The baseline level (any x86-64, and other CPUs): int4_gemm.h's chains with each multiply-add a
// product then a sum; one row at a time over each group, whose words stay in L1 between rows.
void int4_panel_baseline(const Int4Panel& p, const Int4Activations& act, float* acc) {
  note_kernel_level(CpuIsa::kBaseline);
  const Int4Layout& w = *p.w;
  const int64_t G = w.kernel_groups(), pw = p.width;
  float t[kInt4PanelCols];
  for (int64_t g = 0; g < G; ++g) {
    const int64_t gid = w.group_id[g];
    const float* s = w.scales.data() + gid * w.N + p.col;
    const uint8_t* z = w.zeros.empty() ? nullptr : w.zeros.data() + gid * w.N + p.col;
    for (int64_t m = 0; m < act.M; ++m) {
      const float* a = act.a.data() + m * act.K;
      std::fill(t, t + pw, 0.0f);
      for (int64_t k = w.group_start[g]; k < w.group_start[g + 1]; k += 8) {
        const uint32_t* row = p.words + (k / 8) * pw;
        for (int tt = 0; tt < 8; ++tt) {
          const float av = a[k + tt];
          for (int64_t j = 0; j < pw; ++j) t[j] = av * nibble(row[j], tt) + t[j];
        }
      }
      const float neg_sum = -act.group_sums[m * G + g];
      float* out = acc + m * kInt4PanelCols;
      for (int64_t j = 0; j < pw; ++j) {
        const float tz = neg_sum * (z ? static_cast<float>(z[j]) : 8.0f) + t[j];
        out[j] = tz * s[j] + out[j];
      }
    }
  }
}

}  // namespace

int64_t int4_layout_words(const ops::Int4Matrix& m) {
  ops::check_int4(m, "upload_weight_int4");
  std::vector<int32_t> source;
  std::vector<int64_t> start;
  std::vector<int32_t> id;
  kernel_rows_of(m, source, start, id);
  return static_cast<int64_t>(source.size()) / 8 * m.cols;
}

Int4Layout make_int4_layout(const ops::Int4Matrix& m, uint32_t* words) {
  ops::check_int4(m, "upload_weight_int4");
  Int4Layout w;
  w.K = m.rows;
  w.N = m.cols;
  kernel_rows_of(m, w.row_source, w.group_start, w.group_id);
  w.kernel_rows = static_cast<int64_t>(w.row_source.size());
  w.scales = m.scales;
  w.zeros = m.zeros;
  const int64_t octets = w.kernel_rows / 8;
  for (int64_t col = 0; col < w.N; col += kInt4PanelCols) {
    const int64_t pw = std::min(kInt4PanelCols, w.N - col);
    uint32_t* panel = words + col * octets;
    for (int64_t o = 0; o < octets; ++o)
      for (int64_t j = 0; j < pw; ++j) {
        uint32_t word = 0;
        for (int t = 0; t < 8; ++t) {
          const int32_t k = w.row_source[static_cast<size_t>(o * 8 + t)];
          if (k >= 0) word |= static_cast<uint32_t>(m.nibble(k, col + j)) << (4 * t);
        }
        panel[o * pw + j] = word;
      }
  }
  w.words = words;
  return w;
}

void Int4Activations::prepare(int64_t rows, int64_t /*cols*/, const float* A, const Int4Layout& w,
                              DType input_dtype) {
  M = rows;
  K = w.kernel_rows;
  const size_t n = static_cast<size_t>(M * w.K);
  thread_local std::vector<float> rounded;
  const float* src = A;
  if (input_dtype == DType::kBFloat16 || input_dtype == DType::kFloat16) {
    rounded.resize(n);
    (input_dtype == DType::kBFloat16 ? round_through_bf16 : round_through_fp16)(A, n, rounded.data());
    src = rounded.data();
  }
  // Nibble t is read as u·16^t (t < 7): A'·16^-t makes the product A'·u exactly.
  static constexpr float kUnshift[8] = {1.0f, 0x1p-4f, 0x1p-8f, 0x1p-12f, 0x1p-16f, 0x1p-20f, 0x1p-24f, 1.0f};
  const int64_t G = w.kernel_groups();
  a.resize(static_cast<size_t>(M * K));
  group_sums.resize(static_cast<size_t>(M * G));
  for (int64_t m = 0; m < M; ++m) {
    const float* in = src + m * w.K;
    float* out = a.data() + m * K;
    for (int64_t g = 0; g < G; ++g) {
      float sum = 0.0f;
      for (int64_t r = w.group_start[g]; r < w.group_start[g + 1]; ++r) {
        const int32_t k = w.row_source[static_cast<size_t>(r)];
        const float v = k >= 0 ? in[k] : 0.0f;
        sum += v;
        out[r] = v * kUnshift[r % 8];
      }
      group_sums[static_cast<size_t>(m * G + g)] = sum;
    }
  }
}

void int4_gemm_block(CpuIsa isa, const Int4Layout& w, const Int4Activations& a, float* C, float beta, int64_t n0,
                     int64_t nn) {
  thread_local std::vector<float> acc;
  const int64_t octets = w.kernel_rows / 8;
  for (int64_t col = n0; col < n0 + nn; col += kInt4PanelCols) {
    const Int4Panel p{&w, w.words + col * octets, col, std::min(kInt4PanelCols, w.N - col)};
    acc.assign(static_cast<size_t>(a.M * kInt4PanelCols), 0.0f);
    switch (isa) {
#if defined(__x86_64__)
      case CpuIsa::kAvx512: avx512::int4_panel(p, a, acc.data()); break;
      case CpuIsa::kAvx2: avx2::int4_panel(p, a, acc.data()); break;
#endif
      default: int4_panel_baseline(p, a, acc.data()); break;
    }
    for (int64_t m = 0; m < a.M; ++m) {
      float* c = C + m * w.N + col;
      const float* s = acc.data() + m * kInt4PanelCols;
      for (int64_t j = 0; j < p.width; ++j) c[j] = s[j] + (beta != 0.0f ? beta * c[j] : 0.0f);
    }
  }
}

void int4_gemm_block(const Int4Layout& w, const Int4Activations& a, float* C, float beta, int64_t n0, int64_t nn) {
  int4_gemm_block(cpu_isa(), w, a, C, beta, n0, nn);
}

}  // namespace ftx::cpu
