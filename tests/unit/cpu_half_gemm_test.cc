// One GEMM of the CPU backend with fp16/bf16 (and fp32, and int8) weights against a double-precision
// evaluation of Backend::gemm's contract written from its formula: A rounded to the weights'
// dtype (round to nearest even; fp32 as it is), B as held, products summed exactly (double),
// C = A·B + beta·C. Both sides round the same fp32 A, so only the engine's fp32 sums differ: 1e-5 x
// the largest |C| of the case. Covered: the streaming kernels (2..16 rows; one row too for half),
// one fp32 row on row-major [K, N] weights (sgemv) and on a transposed [N, K] (streaming), K cut
// into pieces for more rows than one group, and the many-row paths (the tile kernel; bf16 at the
// AVX-512 level: AVX512-BF16 pair tiles for an even K, oneDNN for an odd K; a transposed B: the
// transposed tile kernel from 16 rows at the AVX2 level), [K,N] and transposed [N,K] weights, widths that are not a
// multiple of the 64-column block and depths that are not a multiple of 16, beta 0 and 1, and
// [K,N] weights held row-major (upload_weight) or in column panels (upload_weight_matrix) of 256
// columns or narrower (balanced_panel_cols: 192 for N = 768 and 2304, 64 for N = 640, two threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/cpu/bf16_pair_gemm.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/widening_gemm.h"
#include "lib/ops/host_math.h"

namespace ftx {
namespace {

double round_to(DType t, float v) {
  if (t == DType::kFloat32) return v;
  return t == DType::kBFloat16 ? bf16_to_float(float_to_bf16(v)) : half_to_float(float_to_half(v));
}

struct Case {
  int64_t M, N, K;
  bool trans;
  float beta;
};

class CpuGemm : public ::testing::TestWithParam<DType> {};

TEST_P(CpuGemm, MatchesRoundedOperandsSummedExactly) {
  const DType dt = GetParam();
  cpu::CpuBackend be(2, dt);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Case cases[] = {{1, 200, 72, false, 0}, {3, 130, 64, true, 0}, {8, 1000, 33, false, 1}, {9, 300, 100, false, 0},
                        {9, 301, 70, true, 0},  {40, 257, 96, false, 1}, {64, 129, 48, true, 1}, {1, 5000, 64, true, 0},
                        {2, 1100, 40, false, 0}, {20, 700, 64, false, 0}, {16, 777, 50, true, 1}, {13, 520, 31, false, 1},
                        {24, 300, 31, false, 0}, {70, 520, 766, false, 1}, {17, 64, 2, false, 0},
                        // K in several pieces: one group of rows (256 KB pieces), several (64 KB)
                        {3, 256, 1100, false, 1}, {6, 520, 600, false, 0}, {12, 300, 700, false, 1},
                        // panels narrower than 256 columns (two threads): one row, groups, pieces, tiles
                        {1, 768, 100, false, 0}, {1, 2304, 40, false, 1}, {2, 768, 700, false, 0},
                        {5, 2304, 64, false, 1}, {8, 640, 300, false, 0}, {1, 640, 90, false, 1},
                        {20, 768, 50, false, 1}, {40, 640, 34, false, 0}};
  for (const Case& c : cases)
    for (bool packed : {false, true}) {
    if (packed && c.trans) continue;
    SCOPED_TRACE(::testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K << " trans=" << c.trans
                                      << " beta=" << c.beta << " packed=" << packed);
    std::vector<float> a(c.M * c.K), w(c.K * c.N), out(c.M * c.N);
    for (auto& v : a) v = nd(rng);
    for (auto& v : w) v = 0.1f * nd(rng);
    for (auto& v : out) v = nd(rng);
    const std::vector<float> before = out;
    const ops::Weight B = packed ? be.upload_weight_matrix(w.data(), DType::kFloat32, c.K, c.N)
                                 : be.upload_weight(w.data(), DType::kFloat32, w.size());
    ASSERT_EQ(B.dtype, dt);
    EXPECT_EQ(B.panel_cols, packed ? cpu::balanced_panel_cols(c.N, 2) : 0);
    be.gemm(c.M, c.N, c.K, a.data(), B, c.trans, out.data(), c.beta);
    // B as held: the matrix rounded to dt; with trans it is stored [N, K].
    std::vector<double> want(c.M * c.N);
    double scale = 1e-30;
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < c.K; ++k)
          s += round_to(dt, a[m * c.K + k]) * round_to(dt, c.trans ? w[n * c.K + k] : w[k * c.N + n]);
        want[m * c.N + n] = s + c.beta * before[m * c.N + n];
        scale = std::max(scale, std::fabs(want[m * c.N + n]));
      }
    double worst = 0, unrounded = 0;
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        worst = std::max(worst, std::fabs(out[m * c.N + n] - want[m * c.N + n]));
        // The same product without rounding A: what a kernel that skipped the rounding would give.
        double s = 0;
        for (int64_t k = 0; k < c.K; ++k)
          s += static_cast<double>(a[m * c.K + k]) * round_to(dt, c.trans ? w[n * c.K + k] : w[k * c.N + n]);
        unrounded = std::max(unrounded, std::fabs(s + c.beta * before[m * c.N + n] - want[m * c.N + n]));
      }
    EXPECT_LE(worst, 1e-5 * scale);
    if (dt != DType::kFloat32)
      EXPECT_GT(unrounded, 3e-5 * scale) << "the case cannot tell a rounded A from an unrounded one";
    be.release_weight(B);
    }
}

// A row's results do not depend on how many rows share the GEMM (a request's logits on how many
// others share its decode step): each sum is one FMA chain over k in order, whether K runs whole
// or in pieces, in the streaming kernel (one row, one group, several groups) and the tile kernel,
// at every instruction-set level (ctest runs this at each). A transposed B (the tied lm_head) is a
// dot product per output summed in lanes, the same lanes for one row (the streaming kernel) as for
// many (at the AVX2 level from 16 rows the transposed tile kernel, which runs its four chains one
// after another): K with and
// without vectors past the last four-vector step, and shorter than one.
//
// The one exception (docs/cpu.md): bf16 [K, N] GEMMs of many rows at the AVX-512 level, more than
// 8 rows on AVX512-BF16's pair tiles (an even K, no AMX), more than 16 on oneDNN otherwise. Both add
// the same exact products (a bf16 times a bf16 is exact in fp32) in another order, so a row there
// differs from the row alone by at most the two sums' worst rounding, 2·γ_K·Σ_k |a_k·b_k| (γ_K =
// K·u / (1 - K·u), u = 2^-24: Higham, Accuracy and Stability of Numerical Algorithms, (3.5)), and
// the rows of any two GEMMs of more than 16 rows are the same bits.
struct RowsAloneAndTogether {
  std::vector<float> alone, together;  // each row multiplied alone; all `rows` rows in one GEMM
};
RowsAloneAndTogether rows_alone_and_together(cpu::CpuBackend& be, const ops::Weight& B, bool trans, const float* a,
                                             int64_t rows, int64_t N, int64_t K) {
  RowsAloneAndTogether r{std::vector<float>(rows * N), std::vector<float>(rows * N)};
  for (int64_t m = 0; m < rows; ++m) be.gemm(1, N, K, a + m * K, B, trans, r.alone.data() + m * N, 0.0f);
  be.gemm(rows, N, K, a, B, trans, r.together.data(), 0.0f);
  return r;
}

// Outputs of `rows` rows multiplied together that differ (in any bit) from the same rows alone.
int64_t outputs_differing_from_rows_alone(cpu::CpuBackend& be, const ops::Weight& B, bool trans, const float* a,
                                          int64_t rows, int64_t N, int64_t K) {
  const RowsAloneAndTogether r = rows_alone_and_together(be, B, trans, a, rows, N, K);
  int64_t differ = 0;
  for (int64_t i = 0; i < rows * N; ++i) differ += std::memcmp(&r.together[i], &r.alone[i], sizeof(float)) != 0;
  return differ;
}

TEST_P(CpuGemm, RowResultsDoNotDependOnTheRowsBesideThem) {
  const DType dt = GetParam();
  cpu::CpuBackend be(2, dt);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t kRows = 20;
  // [K, N] layer matrices in panels of 256 and of 192 columns; a transposed [N, K] (the tied
  // lm_head, N = 300).
  for (const auto& [N, K] : {std::pair<int64_t, int64_t>{700, 900}, {768, 900}, {300, 900}, {300, 917}, {300, 20}}) {
    const bool trans = N == 300;
    std::vector<float> a(kRows * K);
    for (auto& v : a) v = nd(rng);
    std::vector<float> w(K * N);
    for (auto& v : w) v = 0.1f * nd(rng);
    const ops::Weight B = trans ? be.upload_weight(w.data(), DType::kFloat32, w.size())
                                : be.upload_weight_matrix(w.data(), DType::kFloat32, K, N);
    std::vector<float> all(kRows * N);
    be.gemm(kRows, N, K, a.data(), B, trans, all.data(), 0.0f);
    for (int64_t M : {2, 3, 4, 5, 8, 9, 13, 16, 17, 20}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " K=" << K << " trans=" << trans << " M=" << M);
      if (!(dt == DType::kBFloat16 && !trans && M > 8 && cpu::has_avx512_core())) {
        EXPECT_EQ(outputs_differing_from_rows_alone(be, B, trans, a.data(), M, N, K), 0) << "of " << M * N;
        continue;
      }
      // The exception: within 2·γ_K·Σ|a_k·b_k| of the row alone, over the operands as multiplied
      // (A and B rounded to bf16).
      const RowsAloneAndTogether r = rows_alone_and_together(be, B, trans, a.data(), M, N, K);
      const double u = std::ldexp(1.0, -24), gamma = K * u / (1 - K * u);
      int64_t over = 0, differ = 0;
      double largest = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double magnitude = 0;
          for (int64_t k = 0; k < K; ++k)
            magnitude += std::fabs(round_to(dt, a[m * K + k]) * round_to(dt, w[k * N + n]));
          const double d = std::fabs(static_cast<double>(r.together[m * N + n]) - r.alone[m * N + n]);
          over += d > 2 * gamma * magnitude;
          differ += d != 0;
          largest = std::max(largest, d / magnitude);
        }
      EXPECT_EQ(over, 0) << "of " << M * N << " outputs differ from the row alone by more than 2·γ_K·Σ|a·b| "
                         << "(largest: " << largest << " Σ|a·b|, bound " << 2 * gamma << ")";
      std::printf("bf16, %lld rows at the avx512 level: %lld of %lld outputs differ from the row alone, "
                  "by at most %.3g Σ|a·b| (bound %.3g)\n",
                  static_cast<long long>(M), static_cast<long long>(differ), static_cast<long long>(M * N), largest,
                  2 * gamma);
      if (M > 16)  // rows of two GEMMs on the same path: the same bits
        EXPECT_EQ(0, std::memcmp(r.together.data(), all.data(), r.together.size() * sizeof(float)));
    }
    be.release_weight(B);
  }
}

// The same weights give the same sums whatever width their panels have: a backend of two threads
// holds [K, 768] in panels of 192 columns, one of three threads in panels of 256.
TEST_P(CpuGemm, ResultsDoNotDependOnThePanelWidth) {
  const DType dt = GetParam();
  cpu::CpuBackend two(2, dt), three(3, dt);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t N = 768, K = 300;
  std::vector<float> w(K * N), a(4 * K);
  for (auto& v : w) v = 0.1f * nd(rng);
  for (auto& v : a) v = nd(rng);
  const ops::Weight B2 = two.upload_weight_matrix(w.data(), DType::kFloat32, K, N);
  const ops::Weight B3 = three.upload_weight_matrix(w.data(), DType::kFloat32, K, N);
  ASSERT_EQ(B2.panel_cols, 192);
  ASSERT_EQ(B3.panel_cols, 256);
  for (int64_t M : {1, 4}) {
    SCOPED_TRACE(M);
    std::vector<float> c2(M * N), c3(M * N);
    two.gemm(M, N, K, a.data(), B2, false, c2.data(), 0.0f);
    three.gemm(M, N, K, a.data(), B3, false, c3.data(), 0.0f);
    EXPECT_EQ(0, std::memcmp(c2.data(), c3.data(), c2.size() * sizeof(float)));
  }
  two.release_weight(B2);
  three.release_weight(B3);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuGemm, ::testing::Values(DType::kBFloat16, DType::kFloat16, DType::kFloat32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Weight-only int8 layer matrices are held in column panels too: several panels, few rows (the
// streaming kernel) and many (the widened panels; for a bf16 model the pair tiles, and the
// widening kernel for an odd K), beta 0 and 1, against (A' · q) · diag(scale) in double, with q and
// scale from FT's rule (quantize_int8_columns) and A' = A rounded to the model's dtype
// (Weight::input_dtype), each product exact: 1e-5 of the largest |C|.
class Int8PackedGemm : public ::testing::TestWithParam<DType> {};

TEST_P(Int8PackedGemm, MatchesDequantisedProduct) {
  const DType dt = GetParam();
  cpu::CpuBackend be(2, dt);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const Case cases[] = {{1, 777, 90, false, 0},  {5, 768, 90, false, 1},  {12, 777, 90, false, 0},
                        {12, 768, 90, false, 1}, {9, 300, 100, false, 0}, {40, 2304, 64, false, 1},
                        {70, 520, 766, false, 0}, {13, 520, 31, false, 1}, {17, 64, 2, false, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "M=" << c.M << " N=" << c.N << " K=" << c.K << " beta=" << c.beta);
    std::vector<float> a(c.M * c.K), w(c.K * c.N), out(c.M * c.N), scale(c.N);
    std::vector<int8_t> q(c.K * c.N);
    for (auto& v : a) v = nd(rng);
    for (auto& v : w) v = 0.1f * nd(rng);
    for (auto& v : out) v = nd(rng);
    const std::vector<float> before = out;
    ops::quantize_int8_columns(w.data(), c.K, c.N, q.data(), scale.data());
    const ops::Weight B = be.upload_weight_int8(w.data(), DType::kFloat32, c.K, c.N);
    EXPECT_EQ(B.panel_cols, cpu::balanced_panel_cols(c.N, 2));
    EXPECT_EQ(B.input_dtype, dt);
    be.gemm(c.M, c.N, c.K, a.data(), B, false, out.data(), c.beta);
    double worst = 0, largest = 1e-30, unrounded = 0;
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double s = 0, u = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          s += round_to(dt, a[m * c.K + k]) * q[k * c.N + n];
          u += static_cast<double>(a[m * c.K + k]) * q[k * c.N + n];
        }
        const double want = s * scale[n] + c.beta * before[m * c.N + n];
        worst = std::max(worst, std::fabs(out[m * c.N + n] - want));
        largest = std::max(largest, std::fabs(want));
        unrounded = std::max(unrounded, std::fabs(u * scale[n] + c.beta * before[m * c.N + n] - want));
      }
    EXPECT_LE(worst, 1e-5 * largest);
    if (dt != DType::kFloat32)
      EXPECT_GT(unrounded, 3e-5 * largest) << "the case cannot tell a rounded A from an unrounded one";
    be.release_weight(B);
  }
}

// A bf16 model's int8 rows are independent of the rows beside them: up to eight on the streaming
// kernel (A rounded first), from nine up on the pair tiles, whose order of k never depends on M.
TEST(Int8Bf16Gemm, RowResultsDoNotDependOnTheRowsBesideThem) {
  cpu::CpuBackend be(2, DType::kBFloat16);
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t K = 900, N = 768;
  std::vector<float> a(24 * K), w(K * N);
  for (auto& v : a) v = nd(rng);
  for (auto& v : w) v = 0.1f * nd(rng);
  const ops::Weight B = be.upload_weight_int8(w.data(), DType::kFloat32, K, N);
  for (int64_t M : {2, 5, 8}) {
    SCOPED_TRACE(M);
    EXPECT_EQ(outputs_differing_from_rows_alone(be, B, false, a.data(), M, N, K), 0) << "of " << M * N;
  }
  // Nine rows and more: each row of a 24-row GEMM equals the same row among 9 (tiles of 6 and 3).
  std::vector<float> nine(9 * N), all(24 * N);
  be.gemm(9, N, K, a.data() + 15 * K, B, false, nine.data(), 0.0f);
  be.gemm(24, N, K, a.data(), B, false, all.data(), 0.0f);
  EXPECT_EQ(0, std::memcmp(nine.data(), all.data() + 15 * N, nine.size() * sizeof(float)));
  be.release_weight(B);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Int8PackedGemm, ::testing::Values(DType::kBFloat16, DType::kFloat16, DType::kFloat32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(BalancedPanelCols, SharesThePanelsEvenly) {
  EXPECT_EQ(cpu::balanced_panel_cols(1024, 2), 256);  // GPT-2 medium: 4 panels
  EXPECT_EQ(cpu::balanced_panel_cols(3072, 2), 256);
  EXPECT_EQ(cpu::balanced_panel_cols(2304, 2), 192);  // GPT-2 124M QKV: 9 panels of 256, 12 of 192
  EXPECT_EQ(cpu::balanced_panel_cols(768, 2), 192);
  EXPECT_EQ(cpu::balanced_panel_cols(640, 2), 64);
  EXPECT_EQ(cpu::balanced_panel_cols(300, 2), 256);   // 2 panels, the last one narrower
  EXPECT_EQ(cpu::balanced_panel_cols(768, 16), 256);  // nothing shares out: as before
  EXPECT_EQ(cpu::balanced_panel_cols(768, 1), 256);
  EXPECT_EQ(cpu::balanced_panel_cols(2304, 4), 192);
}

// A panel width the kernels cannot take is refused with the width, before anything is moved.
TEST(PackColumnPanels, RefusesAWidthOutsideOneTo256) {
  std::vector<float> m(4 * 300, 1.0f);
  for (int64_t bad : {int64_t(0), int64_t(-64), int64_t(320)}) {
    try {
      cpu::pack_column_panels(m.data(), sizeof(float), 4, 300, bad);
      ADD_FAILURE() << "accepted panel width " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("panel width " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(std::count(m.begin(), m.end(), 1.0f), static_cast<std::ptrdiff_t>(m.size()));
}

// Weights are held in the dtype: the embedding lookup widens the stored (rounded) row exactly.
TEST(HalfEmbedding, RowIsTheRoundedTableRow) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    cpu::CpuBackend be(1, dt);
    std::vector<float> table(4 * 3);
    for (size_t i = 0; i < table.size(); ++i) table[i] = 0.1f * static_cast<float>(i) + 0.0123f;
    const ops::Weight t = be.upload_weight(table.data(), DType::kFloat32, table.size());
    const int32_t ids[] = {2, 0}, pos[] = {0, 1};
    std::vector<float> out(2 * 3);
    be.embedding(out.data(), t, nullptr, ops::PositionTable::kNone, 0, ids, pos, 2, 3, 2.0f);
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(out[r * 3 + i], static_cast<float>(2.0 * round_to(dt, table[ids[r] * 3 + i])));
    be.release_weight(t);
  }
}

// The pair kernel takes k two at a time: an odd depth (or a CPU without AVX512-BF16) is refused
// with the offending K, never read past a row's end; the backend sends those to oneDNN.
TEST(Bf16PairGemm, RefusesAnOddDepth) {
  EXPECT_FALSE(cpu::bf16_pair_gemm_supported(3));
  std::vector<uint16_t> a(2 * 3, 0x3f80), b(3 * 16, 0x3f80);
  std::vector<float> c(2 * 16, 0.0f);
  try {
    cpu::bf16_pair_gemm_block(2, 16, 3, a.data(), b.data(), false, c.data(), 0.0f, 0, 16);
    FAIL() << "K = 3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K = 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c, std::vector<float>(2 * 16, 0.0f));  // nothing written
}

}  // namespace
}  // namespace ftx
