// INT4 weight-only on CUDA (label gpu; the device cases skip without one, see gpu_test_util.h).
//  * CudaInt4Layout (no device needed, CUDA builds): the device layout (kernels/quantization/
//    int4_layout.h: padded columns, act-order rows sorted by group) and int4_gemm_twin, the CPU
//    twin of the kernel, against the float64 GEMM over dequantize_int4 (lib/ops/int4_matrix.h).
//  * CudaInt4 (a device): the backend's gemm() on upload_weight_int4 equal to the twin bit for bit
//    (fp32 A and C), within the float64 bound, batch-independent, with half activations and
//    outputs, and beside the CPU backend's INT4 GEMM where that backend has one.
// Over symmetric and zero-point matrices, groups of 32 and 128 and per channel, with and without an
// act-order group index, M = 1, 8, 64 and input dtypes fp32, bf16, fp16. Seeded inputs;
// FTX_TEST_SEED repeats a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/error.h"
#include "gpu_test_util.h"
#include "lib/ops/backend.h"
#include "lib/ops/int4_matrix.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/quantization/int4_layout.h"
#endif

namespace ftx {
namespace {

#ifdef FTX_HAVE_CUDA

uint32_t seed() {
  if (const char* s = std::getenv("FTX_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

// K = 416: 13 groups of 32, 3 of 128 and a last one of 32 rows, and a last partial step of the
// kernel's 64 rows; N = 198: even but not a multiple of the device's 8-column words (padding).
constexpr int64_t kK = 416, kN = 198;

struct Case {
  bool zero_points;
  int64_t group;  // kK: per channel
  bool act_order;
  std::string name() const {
    return std::string(zero_points ? "zero-point" : "symmetric") + " group " + std::to_string(group) +
           (act_order ? " act-order" : "");
  }
};

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (bool zp : {false, true})
    for (int64_t g : {int64_t{32}, int64_t{128}, kK})
      for (bool ao : {false, true}) out.push_back({zp, g, ao});
  return out;
}

class Int4Inputs {
 public:
  explicit Int4Inputs(uint32_t s) : rng_(s) {}
  std::vector<float> uniform(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  // A quantised [kK, kN] matrix; act-order: its rows shuffled with their groups (GPTQ's desc_act:
  // g_idx[k] is the group of the row now at k, groups no longer runs of rows).
  ops::Int4Matrix matrix(const Case& c) {
    const auto w = uniform(static_cast<size_t>(kK * kN), -0.5f, c.zero_points ? 0.9f : 0.5f);
    ops::Int4Matrix m = ops::quantize_int4(w.data(), DType::kFloat32, kK, kN, c.group, c.zero_points);
    if (!c.act_order) return m;
    std::vector<int32_t> p(static_cast<size_t>(kK));
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng_);
    ops::Int4Matrix s = m;
    s.group_index.resize(p.size());
    for (int64_t k = 0; k < kK; ++k) {
      const int64_t from = p[static_cast<size_t>(k)];
      std::copy(m.packed.begin() + from * (kN / 2), m.packed.begin() + (from + 1) * (kN / 2),
                s.packed.begin() + k * (kN / 2));
      s.group_index[static_cast<size_t>(k)] = static_cast<int32_t>(from / c.group);
    }
    return s;
  }

 private:
  std::mt19937 rng_;
};

// a rounded to `in` (nearest even), as the GEMM rounds A before multiplying.
std::vector<float> rounded(const std::vector<float>& a, DType in) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = static_cast<float>(round_to_dtype(a[i], in));
  return out;
}

// The float64 GEMM over the dequantised matrix: C = a' · W, and Σ|a'·W| per element (the scale of
// an fp32 sum's rounding error).
struct Reference {
  std::vector<double> c, mag;
};
Reference float64_gemm(const ops::Int4Matrix& m, const std::vector<float>& a_rounded, int64_t M) {
  const std::vector<double> w = ops::dequantize_int4(m);
  Reference r{std::vector<double>(static_cast<size_t>(M * m.cols), 0.0),
              std::vector<double>(static_cast<size_t>(M * m.cols), 0.0)};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < m.rows; ++k) {
      const double a = a_rounded[static_cast<size_t>(i * m.rows + k)];
      for (int64_t n = 0; n < m.cols; ++n) {
        const double p = a * w[static_cast<size_t>(k * m.cols + n)];
        r.c[static_cast<size_t>(i * m.cols + n)] += p;
        r.mag[static_cast<size_t>(i * m.cols + n)] += std::fabs(p);
      }
    }
  return r;
}

// An fp32 sum of kK products, each w = (u - z)·s rounded once: within kK·2^-24 relative of Σ|a'·W|
// in the worst case; 1e-5 (about 170 roundings' worth) is far above what random signs give.
void expect_within_float64(const std::vector<float>& got, const Reference& r, double rel_out, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], r.c[i], 1e-5 * r.mag[i] + rel_out * std::fabs(r.c[i]) + 1e-30) << what << " element " << i;
}

const DType kInputs[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

TEST(CudaInt4Layout, TwinMatchesFloat64) {
  const uint32_t s = seed();
  Int4Inputs in(s);
  for (const Case& c : all_cases()) {
    const ops::Int4Matrix m = in.matrix(c);
    const cuda::Int4DeviceLayout l = cuda::make_int4_layout(m, "test");
    EXPECT_EQ(l.cols_padded, 200);
    EXPECT_EQ(l.perm.empty(), !c.act_order);
    for (size_t k = 1; k < l.row_group.size(); ++k) ASSERT_LE(l.row_group[k - 1], l.row_group[k]) << "sorted by group";
    for (int64_t M : {1, 8, 64}) {
      const auto a = in.uniform(static_cast<size_t>(M * kK), -2.0f, 2.0f);
      for (DType t : kInputs) {
        const auto ar = rounded(a, t);
        std::vector<float> got(static_cast<size_t>(M * kN));
        cuda::int4_gemm_twin(l, M, ar.data(), got.data(), 0.0f);
        expect_within_float64(
            got, float64_gemm(m, ar, M), 0.0,
            c.name() + " M " + std::to_string(M) + " " + dtype_name(t) + " seed " + std::to_string(s));
      }
    }
  }
}

TEST(CudaInt4Layout, PaddedColumnsAndGroupsOfTheLayout) {
  // Every stored value, scale and zero point where the layout says, read back through its indexing.
  Int4Inputs in(seed());
  const ops::Int4Matrix m = in.matrix({true, 32, true});
  const cuda::Int4DeviceLayout l = cuda::make_int4_layout(m, "test");
  const size_t pad = static_cast<size_t>(l.cols_padded);
  for (int64_t k = 0; k < kK; ++k) {
    const int64_t src = l.perm[static_cast<size_t>(k)];
    ASSERT_EQ(l.row_group[static_cast<size_t>(k)], m.group_of(src));
    for (int64_t n = 0; n < l.cols_padded; ++n) {
      const uint8_t b = l.packed[static_cast<size_t>(k) * pad / 2 + static_cast<size_t>(n / 2)];
      const int u = (n & 1) ? (b >> 4) : (b & 0xF);
      ASSERT_EQ(u, n < kN ? m.nibble(src, n) : 0) << k << "," << n;
    }
  }
  for (int64_t g = 0; g < m.groups; ++g)
    for (int64_t n = kN; n < l.cols_padded; ++n) {
      EXPECT_EQ(l.scales[static_cast<size_t>(g) * pad + static_cast<size_t>(n)], 0.0f);
      EXPECT_EQ(l.zeros[static_cast<size_t>(g) * pad + static_cast<size_t>(n)], 8);
    }
  ops::Int4Matrix bad = m;
  bad.group_index[3] = static_cast<int32_t>(m.groups);
  EXPECT_THROW(cuda::make_int4_layout(bad, "test"), Error);
}

class CudaInt4 : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    seed_ = seed();
    gpu_ = ops::make_backend("cuda", 1);
  }
  // gemm() on the device: A (held in a_dtype) and C (held in c_dtype, C's prior contents c0 for beta).
  std::vector<float> gemm(const ops::Weight& w, const std::vector<float>& a, int64_t M, DType a_dtype, DType c_dtype,
                          float beta = 0.0f, const std::vector<float>& c0 = {}) {
    float* da = gpu_->alloc(a.size());
    float* dc = gpu_->alloc(static_cast<size_t>(M * kN));
    const ops::Act A(da, a_dtype), C(dc, c_dtype);
    gpu_->upload_act(A, a.data(), a.size());
    if (!c0.empty()) gpu_->upload_act(C, c0.data(), c0.size());
    gpu_->gemm(M, kN, kK, A, w, false, C, beta);
    std::vector<float> out(static_cast<size_t>(M * kN));
    gpu_->download_act(out.data(), C, out.size());
    gpu_->release(da);
    gpu_->release(dc);
    return out;
  }
  uint32_t seed_ = 0;
  std::unique_ptr<ops::Backend> gpu_;
};

TEST_F(CudaInt4, GemmEqualsTwinAndFloat64) {
  Int4Inputs in(seed_);
  for (const Case& c : all_cases()) {
    const ops::Int4Matrix m = in.matrix(c);
    const cuda::Int4DeviceLayout l = cuda::make_int4_layout(m, "test");
    for (DType t : kInputs) {
      const ops::Weight w = gpu_->upload_weight_int4(m, t);
      for (int64_t M : {1, 8, 64}) {
        const auto a = in.uniform(static_cast<size_t>(M * kK), -2.0f, 2.0f);
        const auto ar = rounded(a, t);
        const std::string what =
            c.name() + " M " + std::to_string(M) + " " + dtype_name(t) + " seed " + std::to_string(seed_);
        const auto got = gemm(w, a, M, DType::kFloat32, DType::kFloat32);
        std::vector<float> twin(got.size());
        cuda::int4_gemm_twin(l, M, ar.data(), twin.data(), 0.0f);
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], twin[i]) << what << " element " << i;
        expect_within_float64(got, float64_gemm(m, ar, M), 0.0, what);
      }
      gpu_->release_weight(w);
    }
  }
}

TEST_F(CudaInt4, RowsDoNotDependOnTheBatch) {
  Int4Inputs in(seed_);
  for (const Case& c : {Case{false, 128, false}, Case{true, 32, true}}) {
    const ops::Weight w = gpu_->upload_weight_int4(in.matrix(c), DType::kBFloat16);
    const int64_t M = 64;
    const auto a = in.uniform(static_cast<size_t>(M * kK), -2.0f, 2.0f);
    const auto all = gemm(w, a, M, DType::kFloat32, DType::kFloat32);
    for (int64_t r : {0, 7, 8, 37, 63}) {
      const std::vector<float> row(a.begin() + r * kK, a.begin() + (r + 1) * kK);
      const auto one = gemm(w, row, 1, DType::kFloat32, DType::kFloat32);
      for (int64_t n = 0; n < kN; ++n)
        ASSERT_EQ(one[static_cast<size_t>(n)], all[static_cast<size_t>(r * kN + n)])
            << c.name() << " row " << r << " col " << n;
    }
    gpu_->release_weight(w);
  }
}

TEST_F(CudaInt4, HalfActivationsOutputsAndBeta) {
  // A held in the input dtype (no rounding left to do), C in it too (one rounding of the fp32
  // result), and beta = 1 adding C's prior contents.
  Int4Inputs in(seed_);
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    for (const Case& c : {Case{true, 128, false}, Case{false, 32, true}}) {
      const ops::Int4Matrix m = in.matrix(c);
      const ops::Weight w = gpu_->upload_weight_int4(m, t);
      const int64_t M = 8;
      const auto ar = rounded(in.uniform(static_cast<size_t>(M * kK), -2.0f, 2.0f), t);
      const auto c0 = rounded(in.uniform(static_cast<size_t>(M * kN), -1.0f, 1.0f), t);
      Reference r = float64_gemm(m, ar, M);
      for (size_t i = 0; i < r.c.size(); ++i) {
        r.c[i] += c0[i];
        r.mag[i] += std::fabs(c0[i]);
      }
      const double out_rel = t == DType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;  // one rounding to C's dtype
      expect_within_float64(gemm(w, ar, M, t, t, 1.0f, c0), r, out_rel, c.name() + " " + dtype_name(t));
      gpu_->release_weight(w);
    }
  }
}

TEST_F(CudaInt4, BesideTheCpuBackendsInt4Gemm) {
  // The CPU backend's INT4 GEMM, where it has one, within the same float64 bound on the same inputs
  // (each backend sums in its own order); a CPU backend without one refuses by name.
  auto cpu = ops::make_backend("cpu", 1);
  Int4Inputs in(seed_);
  const ops::Int4Matrix m = in.matrix({true, 128, true});
  ops::Weight wc;
  try {
    wc = cpu->upload_weight_int4(m, DType::kFloat32);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no INT4 weight-only GEMM"), std::string::npos) << e.what();
    return;
  }
  const ops::Weight wg = gpu_->upload_weight_int4(m, DType::kFloat32);
  const int64_t M = 8;
  const auto a = in.uniform(static_cast<size_t>(M * kK), -2.0f, 2.0f);
  std::vector<float> want(static_cast<size_t>(M * kN));
  float* ca = cpu->alloc(a.size());
  float* cc = cpu->alloc(want.size());
  cpu->upload(ca, a.data(), a.size());
  cpu->gemm(M, kN, kK, ca, wc, false, cc, 0.0f);
  cpu->download(want.data(), cc, want.size());
  const auto got = gemm(wg, a, M, DType::kFloat32, DType::kFloat32);
  const Reference r = float64_gemm(m, a, M);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5 * r.mag[i] + 1e-30) << "element " << i;
  cpu->release(ca);
  cpu->release(cc);
  cpu->release_weight(wc);
  gpu_->release_weight(wg);
}

TEST_F(CudaInt4, RefusesWhatItCannotMultiply) {
  Int4Inputs in(seed_);
  const ops::Int4Matrix m = in.matrix({false, 32, false});
  EXPECT_THROW(gpu_->upload_weight_int4(m, DType::kInt8), Error);
  ops::Int4Matrix odd = m;
  odd.scales.pop_back();
  try {
    gpu_->upload_weight_int4(odd, DType::kFloat32);
    ADD_FAILURE() << "a matrix with a scale missing was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("upload_weight_int4"), std::string::npos) << e.what();
  }
  const ops::Weight w = gpu_->upload_weight_int4(m, DType::kFloat32);
  float* a = gpu_->alloc(kK * kN);
  float* c = gpu_->alloc(kK * kN);
  EXPECT_THROW(gpu_->gemm(1, kK, kN, a, w, true, c, 0.0f), Error);  // never transposed
  gpu_->release(a);
  gpu_->release(c);
  gpu_->release_weight(w);
}

#else

TEST(CudaInt4, NeedsCuda) { GTEST_SKIP() << "ftx was built without CUDA"; }

#endif

}  // namespace
}  // namespace ftx
