// GEMMs that quantise their activations too, by the arithmetic lib/ops/backend.h writes out at its
// end: SmoothQuant W8A8 (int8 × int8, exact int32 sums, per-tensor or per-token activation scales)
// and FP8 (E4M3 × E4M3 with fp32 sums, per-tensor scales). The references follow those steps:
// the activation quantisation in fp32 as stated, the sums exactly.
#include <algorithm>
#include <cmath>
#include <functional>

#include "formats/error.h"
#include "formats/fp8_e4m3.h"
#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"
#include "unit/fp8_accumulator_model.h"

namespace ftx::test {
namespace {

struct Shape {
  int64_t M, N, K;
};

std::string shape_name(const Shape& s) {
  return "M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K);
}

// W8A8's output: float(acc) · (alpha_row · alpha_col) + beta · C, each step in fp32 as stated.
std::vector<float> w8a8_ref(const Shape& s, const std::vector<float>& a, const std::vector<int8_t>& w,
                            const std::vector<float>& alpha_col, float act_scale, float out_scale,
                            const std::vector<float>& c0, float beta) {
  std::vector<float> c(static_cast<size_t>(s.M * s.N));
  for (int64_t m = 0; m < s.M; ++m) {
    const float* row = a.data() + m * s.K;
    float scale = act_scale, alpha_row = out_scale;
    if (act_scale == 0.0f) {  // per-token
      float amax = 0.0f;
      for (int64_t k = 0; k < s.K; ++k) amax = std::max(amax, std::fabs(row[k]));
      scale = amax > 0.0f ? 127.0f / amax : 0.0f;
      alpha_row = amax / 127.0f;
    }
    std::vector<int64_t> q(static_cast<size_t>(s.K));
    for (int64_t k = 0; k < s.K; ++k) q[k] = static_cast<int64_t>(std::min(127.0f, std::max(-128.0f, std::nearbyint(row[k] * scale))));
    for (int64_t n = 0; n < s.N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < s.K; ++k) acc += q[k] * w[k * s.N + n];
      c[m * s.N + n] = static_cast<float>(acc) * (alpha_row * alpha_col[n]) + beta * c0[m * s.N + n];
    }
  }
  return c;
}

// cuBLASLt's int8 and FP8 GEMMs take K and N only in multiples of `multiple` (4 and 16). A device
// refuses any other shape by name, and such a case checks that refusal instead of the sums (the
// CPU takes every shape). Returns whether the case was one of those.
bool device_refuses(OpTest& t, const Shape& s, int64_t multiple,
                    const std::function<ops::Weight(ops::Backend&)>& upload) {
  if (t.on_cpu() || (s.K % multiple == 0 && s.N % multiple == 0)) return false;
  ops::Backend& b = t.be();
  Buffers mem(b);
  const ops::Weight w = upload(b);
  float* a = mem.alloc(static_cast<size_t>(s.M * s.K));
  float* c = mem.alloc(static_cast<size_t>(s.M * s.N));
  b.fill(a, 0.5f, static_cast<size_t>(s.M * s.K));
  std::string what = "no error";
  try {
    b.gemm(s.M, s.N, s.K, a, w, false, c, 0.0f);
  } catch (const Error& e) {
    what = e.what();
  }
  b.release_weight(w);
  EXPECT_NE(what.find("must be multiples of " + std::to_string(multiple)), std::string::npos)
      << shape_name(s) << ": " << what;
  return true;
}

}  // namespace

// Per-tensor (a static activation scale, some activations saturating) and per-token (dynamic, one
// row all zeros: q = 0 and alpha_row = 0) activation scales, int8 weights at both extremes, K not a
// multiple of 4, beta 0 and 1. Both sides compute the same fp32 steps: 1e-6 of max(1, |C|).
BACKEND_OP_TEST(W8A8Gemm, "upload_weight_w8a8", "gemm", "release_weight") {
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 300, 64}, Shape{3, 5, 7}, Shape{4, 256, 517}, Shape{13, 300, 64},
                        Shape{64, 96, 128}, Shape{6, 520, 100}})
    for (bool per_token : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE(shape_name(s) + (per_token ? " per-token" : " per-tensor") + " beta " + std::to_string(beta));
        std::vector<float> a = random(static_cast<size_t>(s.M * s.K), -3.0f, 3.0f);
        if (per_token && s.M > 2) std::fill(a.begin() + s.K, a.begin() + 2 * s.K, 0.0f);
        std::vector<int8_t> w(static_cast<size_t>(s.K * s.N));
        for (auto& x : w) {
          const int e = random_int(0, 3);
          x = static_cast<int8_t>(e == 0 ? -128 : e == 1 ? 127 : random_int(-128, 127));
        }
        const std::vector<float> alpha = random(static_cast<size_t>(s.N), 1e-3f, 1e-2f);
        const float act_scale = per_token ? 0.0f : 127.0f / 2.4f, out_scale = per_token ? 1.0f : random(1, 0.5f, 2.0f)[0];
        const std::vector<float> c0 = random(static_cast<size_t>(s.M * s.N));
        if (device_refuses(*this, s, 4, [&](ops::Backend& b) {
              return b.upload_weight_w8a8(w.data(), s.K, s.N, alpha.data(), act_scale, out_scale);
            }))
          continue;
        expect_matches(
            [&](ops::Backend& b) {
              Buffers mem(b);
              const ops::Weight q = b.upload_weight_w8a8(w.data(), s.K, s.N, alpha.data(), act_scale, out_scale);
              EXPECT_TRUE(q.w8a8);
              float* da = mem.put(a);
              float* c = mem.put(c0);
              b.gemm(s.M, s.N, s.K, da, q, false, c, beta);
              b.release_weight(q);
              return Outs{{"C", mem.get(c, static_cast<size_t>(s.M * s.N))}};
            },
            [&] { return Outs{{"C", w8a8_ref(s, a, w, alpha, act_scale, out_scale, c0, beta)}}; }, Tol{1e-6, 1e-6});
      }
}

// FP8: A quantised to E4M3 with the static activation scale (1/s_x, an fp32 product), products of
// E4M3 values exact, summed in fp32 (the CPU: 1e-6 of Σ|products|·s_x·s_w against float64), scaled
// by s_x·s_w. A device against the CPU: within the bound of Hopper's FP8 accumulator (14 bits
// inside blocks of 128 products, fp8_accumulator_model.h), per output.
BACKEND_OP_TEST(Fp8Gemm, "require_fp8", "upload_weight_fp8", "gemm", "release_weight") {
  try {
    be().require_fp8("the op suite's FP8 GEMM");
  } catch (const Error& e) {  // a GPU without FP8 arithmetic (before sm_89) refuses it, naming the device
    if (on_cpu()) throw;
    GTEST_SKIP() << e.what();
  }
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 256, 64}, Shape{3, 100, 70}, Shape{8, 640, 300}, Shape{40, 257, 96},
                        Shape{2, 300, 1100}, Shape{24, 272, 304}})
    for (float beta : {0.0f, 1.0f}) {
      SCOPED_TRACE(shape_name(s) + " beta " + std::to_string(beta));
      const std::vector<float> a = random(static_cast<size_t>(s.M * s.K), -2.0f, 2.0f);
      const std::vector<float> w = random(static_cast<size_t>(s.K * s.N), -0.1f, 0.1f);
      const std::vector<float> c0 = random(static_cast<size_t>(s.M * s.N));
      float amax_a = 0.0f, amax_w = 0.0f;
      for (float x : a) amax_a = std::max(amax_a, std::fabs(x));
      for (float x : w) amax_w = std::max(amax_w, std::fabs(x));
      const float s_x = amax_a / 448.0f, s_w = amax_w / 448.0f, scale = s_x * s_w;
      std::vector<uint8_t> qw(w.size());
      for (size_t i = 0; i < w.size(); ++i) qw[i] = float_to_e4m3(w[i] / s_w);
      if (device_refuses(*this, s, 16, [&](ops::Backend& b) { return b.upload_weight_fp8(qw.data(), s.K, s.N, s_x, s_w); }))
        continue;
      // The float64 sums and the device's bound, from the quantised operands.
      std::vector<float> want(static_cast<size_t>(s.M * s.N));
      std::vector<double> mag(want.size()), bound(want.size());
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t n = 0; n < s.N; ++n) {
          double acc = 0.0, abs_products = 0.0;
          for (int64_t k = 0; k < s.K; ++k) {
            const double p = static_cast<double>(e4m3_to_float(float_to_e4m3(a[m * s.K + k] * (1.0f / s_x)))) *
                             e4m3_to_float(qw[k * s.N + n]);
            acc += p;
            abs_products += std::fabs(p);
          }
          const size_t i = static_cast<size_t>(m * s.N + n);
          const double bc = static_cast<double>(beta) * c0[i];
          want[i] = static_cast<float>(acc * scale + bc);
          mag[i] = abs_products * scale + std::fabs(bc);
          bound[i] = fp8_gemm_bound(abs_products, s.K, scale) + 1e-6 * std::max(1.0, std::fabs(acc * scale + bc));
        }
      expect_matches(
          [&](ops::Backend& b) {
            Buffers mem(b);
            const ops::Weight q = b.upload_weight_fp8(qw.data(), s.K, s.N, s_x, s_w);
            EXPECT_EQ(q.dtype, DType::kFloat8E4M3);
            float* da = mem.put(a);
            float* c = mem.put(c0);
            b.gemm(s.M, s.N, s.K, da, q, false, c, beta);
            b.release_weight(q);
            return Outs{{"C", mem.get(c, static_cast<size_t>(s.M * s.N)), {}, false, bound}};
          },
          [&] { return Outs{{"C", want, mag}}; }, Tol{1e-6, 0.0});
    }
}

}  // namespace ftx::test

namespace ftx::test {

// INT4 weight-only (lib/ops/int4_matrix.h): A rounded to the input dtype, times the dequantised
// matrix, summed in fp32: against float64 over dequantize_int4, 1e-5 of Σ|a·w| (+ |beta·C|).
// Symmetric and zero-point matrices, groups of 32 and one per column, act-order group indices, K odd,
// N even but not a multiple of the lanes, one row and many, beta 0 and 1, fp32 and bf16 inputs. A
// backend without the GEMM refuses the upload by name (Backend::upload_weight_int4): the CPU must not.
BACKEND_OP_TEST(Int4Gemm, "upload_weight_int4", "gemm", "release_weight") {
  struct Case {
    Shape s;
    int64_t group_size;
    bool act_order, zero_points;
    DType input;
  };
  {
    const float one[2] = {1.0f, 1.0f};
    try {
      be().release_weight(be().upload_weight_int4(ops::quantize_int4(one, DType::kFloat32, 1, 2, 0, false), DType::kFloat32));
    } catch (const Error& e) {  // a backend without the GEMM says so by name
      if (on_cpu()) throw;
      EXPECT_NE(std::string(e.what()).find("no INT4 weight-only GEMM"), std::string::npos) << e.what();
      GTEST_SKIP() << e.what();
    }
  }
  const Case cases[] = {{{1, 134, 256}, 32, false, false, DType::kFloat32}, {{3, 70, 77}, 0, false, true, DType::kBFloat16},
                        {{7, 134, 200}, 32, true, true, DType::kFloat32},  {{17, 262, 128}, 64, false, false, DType::kBFloat16},
                        {{64, 70, 96}, 32, true, false, DType::kFloat32}};
  for (const Case& c : cases)
    for (float beta : {0.0f, 1.0f}) {
      const Shape s = c.s;
      SCOPED_TRACE(shape_name(s) + " group " + std::to_string(c.group_size) + (c.act_order ? " act-order" : "") +
                   (c.zero_points ? " zero points" : "") + " beta " + std::to_string(beta));
      const std::vector<float> w = random(static_cast<size_t>(s.K * s.N), -0.1f, 0.1f);
      ops::Int4Matrix m = ops::quantize_int4(w.data(), DType::kFloat32, s.K, s.N, c.group_size, c.zero_points);
      if (c.act_order) {
        m.group_index.resize(static_cast<size_t>(s.K));
        for (int64_t k = 0; k < s.K; ++k) m.group_index[static_cast<size_t>(k)] = static_cast<int32_t>(k / m.group_size);
        std::shuffle(m.group_index.begin(), m.group_index.end(), rng());
      }
      const std::vector<float> a = random(static_cast<size_t>(s.M * s.K), -2.0f, 2.0f);
      const std::vector<float> c0 = random(static_cast<size_t>(s.M * s.N));
      const std::vector<double> wd = ops::dequantize_int4(m);
      std::vector<float> want(static_cast<size_t>(s.M * s.N));
      std::vector<double> mag(want.size());
      for (int64_t i = 0; i < s.M; ++i)
        for (int64_t n = 0; n < s.N; ++n) {
          double acc = 0, abs_sum = 0;
          for (int64_t k = 0; k < s.K; ++k) {
            const double p = static_cast<double>(round_to(c.input, a[i * s.K + k])) * wd[k * s.N + n];
            acc += p;
            abs_sum += std::fabs(p);
          }
          const double bc = static_cast<double>(beta) * c0[i * s.N + n];
          want[i * s.N + n] = static_cast<float>(acc + bc);
          mag[i * s.N + n] = abs_sum + std::fabs(bc);
        }
      expect_matches(
          [&](ops::Backend& b) {
            Buffers mem(b);
            const ops::Weight q = b.upload_weight_int4(m, c.input);
            EXPECT_TRUE(q.int4);
            float* da = mem.put(a);
            float* cc = mem.put(c0);
            b.gemm(s.M, s.N, s.K, da, q, false, cc, beta);
            b.release_weight(q);
            return Outs{{"C", mem.get(cc, static_cast<size_t>(s.M * s.N))}};
          },
          [&] { return Outs{{"C", want, mag}}; }, Tol{1e-5, 1e-5});
    }
}

}  // namespace ftx::test
