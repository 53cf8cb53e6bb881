// The CPU backend's INT4 weight-only GEMM (lib/cpu/int4_gemm.h) against a float64 GEMM over the
// dequantised matrix (ops::dequantize_int4, the contract's own emulation): A rounded to the model's
// float type (as both sides do), (u - z)·s widened exactly, products summed in double. Within 1e-5
// of Σ|a·w| (+ |beta·C|) per output. Every instruction-set level this process may run (the CPU's,
// capped by FTX_CPU_ISA: ctest runs the binary again at each level below, tests/e2e/cpu_isa) is
// called directly on the same layout, and the backend's gemm at the process's level.
//
// Covered: symmetric and zero-point matrices; groups of 32, 64, 128 rows and one group per column;
// act-order group indices (rows of a group scattered over K, groups of different sizes, one group
// with no rows); K odd and not a multiple of the group size; N even but not a multiple of either
// level's lanes (vector blocks, narrower blocks and the one-column tail); M = 1, 2, 3, 7, 16, 17, 64
// (one pass, groups of rows over pieces of whole groups); beta 0 and 1; input dtypes fp32, bf16 and
// fp16. And each row's outputs are the same bits alone as among M rows, at every level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/int4_gemm.h"
#include "lib/ops/int4_matrix.h"

namespace ftx {
namespace {

struct MatrixCase {
  int64_t K, N, group_size;
  bool act_order;
};

std::string name_of(const MatrixCase& c, bool zero_points) {
  return "K " + std::to_string(c.K) + " N " + std::to_string(c.N) + " group " + std::to_string(c.group_size) +
         (c.act_order ? " act-order" : "") + (zero_points ? " zero points" : " symmetric");
}

// A quantised random matrix; act-order: the rows' groups shuffled over K (every group keeps its
// size), and with 3 or more groups, group 1's rows given to group 0 (a group with no rows).
ops::Int4Matrix make_matrix(const MatrixCase& c, bool zero_points, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(c.K * c.N));
  for (auto& v : w) v = nd(rng) + (zero_points ? 0.02f : 0.0f);  // asymmetric ranges for the zero points
  ops::Int4Matrix m = ops::quantize_int4(w.data(), DType::kFloat32, c.K, c.N, c.group_size, zero_points);
  if (c.act_order) {
    m.group_index.resize(static_cast<size_t>(c.K));
    for (int64_t k = 0; k < c.K; ++k) m.group_index[static_cast<size_t>(k)] = static_cast<int32_t>(k / m.group_size);
    std::shuffle(m.group_index.begin(), m.group_index.end(), rng);
    if (m.groups >= 3)
      for (auto& g : m.group_index) g = g == 1 ? 0 : g;
  }
  return m;
}

double round_to(DType t, float v) {
  if (t == DType::kFloat32) return v;
  return t == DType::kBFloat16 ? bf16_to_float(float_to_bf16(v)) : half_to_float(float_to_half(v));
}

// The float64 GEMM and each output's Σ|a·w| + |beta·c|.
struct Reference {
  std::vector<double> c, mag;
};
Reference reference(const ops::Int4Matrix& m, const std::vector<double>& w, const std::vector<float>& a, int64_t M,
                    DType dt, const std::vector<float>& c0, float beta) {
  Reference r{std::vector<double>(static_cast<size_t>(M * m.cols)), std::vector<double>(static_cast<size_t>(M * m.cols))};
  std::vector<double> ar(static_cast<size_t>(m.rows));
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t k = 0; k < m.rows; ++k) ar[k] = round_to(dt, a[i * m.rows + k]);
    for (int64_t n = 0; n < m.cols; ++n) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < m.rows; ++k) {
        const double p = ar[k] * w[k * m.cols + n];
        s += p;
        mag += std::fabs(p);
      }
      const double bc = static_cast<double>(beta) * c0[i * m.cols + n];
      r.c[i * m.cols + n] = s + bc;
      r.mag[i * m.cols + n] = mag + std::fabs(bc);
    }
  }
  return r;
}

// The worst |got - want| / max(Σ|a·w|, 1e-30) of one GEMM.
double worst_error(const std::vector<float>& got, const Reference& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want.c[i]) / std::max(want.mag[i], 1e-30));
  return worst;
}

// The levels this process may run, lowest first.
std::vector<cpu::CpuIsa> levels() {
  std::vector<cpu::CpuIsa> out;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::kBaseline, cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512})
    if (isa <= cpu::cpu_isa()) out.push_back(isa);
  return out;
}

// C = A'·W + beta·C through one level's kernels on `w`'s layout, all columns on this thread.
std::vector<float> level_gemm(cpu::CpuIsa isa, const cpu::Int4Layout& w, int64_t M, const float* a, DType dt,
                              std::vector<float> c, float beta) {
  cpu::Int4Activations act;
  act.prepare(M, w.K, a, w, dt);
  cpu::int4_gemm_block(isa, w, act, c.data(), beta, 0, w.N);
  return c;
}

const MatrixCase kCases[] = {
    {256, 134, 32, false}, {256, 134, 64, false}, {256, 134, 128, false}, {256, 134, 0, false},
    {77, 70, 32, false},   {77, 70, 0, false},    {200, 134, 32, true},   {77, 70, 32, true},
    {1100, 70, 128, false},  // K' · 32 bytes past one 32 KB piece: more than four rows pass over pieces
};
const int64_t kRows[] = {1, 2, 3, 7, 16, 17, 64};

TEST(CpuInt4Gemm, EveryLevelMatchesFloat64OverTheDequantisedMatrix) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  double worst_all = 0;
  for (const MatrixCase& mc : kCases)
    for (bool zero_points : {false, true}) {
      const ops::Int4Matrix m = make_matrix(mc, zero_points, rng);
      const std::vector<double> w = ops::dequantize_int4(m);
      std::vector<uint32_t> words(static_cast<size_t>(cpu::int4_layout_words(m)));
      const cpu::Int4Layout layout = cpu::make_int4_layout(m, words.data());
      for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16})
        for (int64_t M : kRows)
          for (float beta : {0.0f, 1.0f}) {
            SCOPED_TRACE(name_of(mc, zero_points) + " dtype " + dtype_name(dt) + " M " + std::to_string(M) + " beta " +
                         std::to_string(beta));
            std::vector<float> a(static_cast<size_t>(M * mc.K)), c0(static_cast<size_t>(M * mc.N));
            for (auto& v : a) v = ud(rng);
            for (auto& v : c0) v = ud(rng);
            const Reference want = reference(m, w, a, M, dt, c0, beta);
            for (cpu::CpuIsa isa : levels()) {
              SCOPED_TRACE(cpu::cpu_isa_name(isa));
              const double e = worst_error(level_gemm(isa, layout, M, a.data(), dt, c0, beta), want);
              EXPECT_LE(e, 1e-5);
              worst_all = std::max(worst_all, e);
            }
          }
    }
  std::printf("worst error over all cases and levels: %.3g of sum |a*w|\n", worst_all);
}

// The backend's path (upload_weight_int4, gemm over column blocks on two threads, release_weight)
// at the process's level, against the same reference.
TEST(CpuInt4Gemm, BackendGemmMatchesFloat64) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  cpu::CpuBackend be(2);
  for (const MatrixCase& mc : {MatrixCase{256, 134, 32, false}, MatrixCase{200, 134, 32, true},
                               MatrixCase{77, 262, 0, false}})
    for (bool zero_points : {false, true}) {
      const ops::Int4Matrix m = make_matrix(mc, zero_points, rng);
      const std::vector<double> w = ops::dequantize_int4(m);
      for (DType dt : {DType::kFloat32, DType::kBFloat16})
        for (int64_t M : {int64_t(1), int64_t(7), int64_t(64)})
          for (float beta : {0.0f, 1.0f}) {
            SCOPED_TRACE(name_of(mc, zero_points) + " dtype " + dtype_name(dt) + " M " + std::to_string(M));
            const ops::Weight B = be.upload_weight_int4(m, dt);
            EXPECT_EQ(ops::weight_kind(B), ops::WeightKind::kInt4Groups);
            std::vector<float> a(static_cast<size_t>(M * mc.K)), c(static_cast<size_t>(M * mc.N));
            for (auto& v : a) v = ud(rng);
            for (auto& v : c) v = ud(rng);
            const Reference want = reference(m, w, a, M, dt, c, beta);
            be.gemm(M, mc.N, mc.K, a.data(), B, false, c.data(), beta);
            EXPECT_LE(worst_error(c, want), 1e-5);
            be.release_weight(B);
          }
    }
}

// Each row's outputs are the same bits computed alone as among M rows, at every level and through
// the backend.
TEST(CpuInt4Gemm, RowResultsDoNotDependOnTheRowsBesideThem) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> ud(-2.0f, 2.0f);
  cpu::CpuBackend be(2);
  for (const MatrixCase& mc : {MatrixCase{256, 134, 64, false}, MatrixCase{77, 70, 32, true},
                               MatrixCase{1100, 70, 128, false}})
    for (bool zero_points : {false, true}) {
      const ops::Int4Matrix m = make_matrix(mc, zero_points, rng);
      std::vector<uint32_t> words(static_cast<size_t>(cpu::int4_layout_words(m)));
      const cpu::Int4Layout layout = cpu::make_int4_layout(m, words.data());
      const ops::Weight B = be.upload_weight_int4(m, DType::kBFloat16);
      for (int64_t M : {int64_t(2), int64_t(3), int64_t(7), int64_t(16), int64_t(17), int64_t(64)}) {
        SCOPED_TRACE(name_of(mc, zero_points) + " M " + std::to_string(M));
        std::vector<float> a(static_cast<size_t>(M * mc.K));
        for (auto& v : a) v = ud(rng);
        const std::vector<float> zeros(static_cast<size_t>(M * mc.N), 0.0f);
        for (cpu::CpuIsa isa : levels()) {
          SCOPED_TRACE(cpu::cpu_isa_name(isa));
          const std::vector<float> together = level_gemm(isa, layout, M, a.data(), DType::kBFloat16, zeros, 0.0f);
          for (int64_t i = 0; i < M; ++i) {
            const std::vector<float> alone = level_gemm(isa, layout, 1, a.data() + i * mc.K, DType::kBFloat16,
                                                        std::vector<float>(static_cast<size_t>(mc.N)), 0.0f);
            ASSERT_EQ(std::memcmp(alone.data(), together.data() + i * mc.N, alone.size() * sizeof(float)), 0)
                << "row " << i;
          }
        }
        std::vector<float> together(zeros), alone(static_cast<size_t>(mc.N));
        be.gemm(M, mc.N, mc.K, a.data(), B, false, together.data(), 0.0f);
        for (int64_t i = 0; i < M; ++i) {
          be.gemm(1, mc.N, mc.K, a.data() + i * mc.K, B, false, alone.data(), 0.0f);
          ASSERT_EQ(std::memcmp(alone.data(), together.data() + i * mc.N, alone.size() * sizeof(float)), 0)
              << "backend, row " << i;
        }
      }
      be.release_weight(B);
    }
}

// Half a byte per weight (K rounded up to whole groups of 8 rows), and what the backend refuses.
TEST(CpuInt4Gemm, HoldsFourBitsPerWeightAndRefusesWhatItCannotDo) {
  std::mt19937 rng(1);
  const ops::Int4Matrix m = make_matrix({256, 134, 32, false}, false, rng);
  EXPECT_EQ(cpu::int4_layout_words(m) * 4, 256 * 134 / 2);
  cpu::CpuBackend be(1);
  const ops::Weight B = be.upload_weight_int4(m, DType::kFloat32);
  std::vector<float> a(256), c(134);
  try {
    be.gemm(1, 134, 256, a.data(), B, true, c.data(), 0.0f);
    ADD_FAILURE() << "a transposed INT4 GEMM ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("INT4 weight cannot be transposed"), std::string::npos) << e.what();
  }
  be.release_weight(B);
  try {
    be.upload_weight_int4(m, DType::kInt8);
    ADD_FAILURE() << "an int8 input dtype was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input dtype int8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ftx
