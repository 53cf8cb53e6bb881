// Normalisation and elementwise ops against torch's formulas in float64 (reference.h): LayerNorm
// (biased variance), RMSNorm (over rows and per Q/K head), the fused residual steps, the softcap,
// bias and (gated) activations. Rows wider than a CUDA kernel's shared-memory row cache (9001) and
// of one element; in place and not.
// Tolerance: the CPU 1e-6 of max(1, the output's magnitude) against float64 (a few fp32 roundings
// after statistics taken in double), a device 1e-5 of max(1, |cpu|).
#include <algorithm>
#include <cmath>
#include <string>

#include "lib/model/model_config.h"
#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"

namespace ftx::test {
namespace {

constexpr Tol kNormTol{1e-6, 1e-5};

std::string dims(int64_t rows, int64_t H) { return "rows " + std::to_string(rows) + " H " + std::to_string(H); }

// x + y + bias per element (y, bias optional), in double, and Σ of the magnitudes.
NormRef residual_ref(const std::vector<float>& x, const std::vector<float>* y, const std::vector<float>* bias,
                     int64_t rows, int64_t H) {
  NormRef r{std::vector<float>(x.size()), std::vector<double>(x.size())};
  for (int64_t i = 0; i < rows * H; ++i) {
    const double yy = y ? (*y)[i] : 0.0, bb = bias ? (*bias)[i % H] : 0.0;
    r.out[i] = static_cast<float>(x[i] + yy + bb);
    r.scale[i] = std::fabs(x[i]) + std::fabs(yy) + std::fabs(bb);
  }
  return r;
}

}  // namespace

// Also rows of a thousandth the size, whose variance is below eps (so eps shows in the output).
BACKEND_OP_TEST(LayerNorm, "layer_norm") {
  for (int64_t rows : {1, 3, 7})
    for (int64_t H : {1, 5, 64, 257, 1024, 9001})
      for (bool with_beta : {true, false})
        for (bool in_place : {false, true}) {
          const float size = rows == 3 ? 1e-3f : 1.0f;
          SCOPED_TRACE(dims(rows, H) + " beta " + std::to_string(with_beta) + " in_place " + std::to_string(in_place));
          const auto x = random(rows * H, -3.0f * size, 5.0f * size), gamma = random(H), beta = random(H),
                     out0 = random(rows * H);
          expect_matches(
              [&](ops::Backend& b) {
                Buffers mem(b);
                float* dx = mem.put(x);
                float* dst = in_place ? dx : mem.put(out0);
                b.layer_norm(dst, dx, mem.put(gamma), with_beta ? mem.put(beta) : nullptr, rows, H, 1e-5f);
                return Outs{{"out", mem.get(dst, rows * H)}, {"x", mem.get(dx, rows * H)}};
              },
              [&] {
                const NormRef r = layer_norm_ref(x, gamma, with_beta ? beta.data() : nullptr, rows, H, 1e-5f);
                return Outs{{"out", r.out, r.scale}, in_place ? Out{"x", r.out, r.scale} : Out{"x", x, {}, true}};
              },
              kNormTol);
        }
}

// x += y + bias, then norm_out = LN(x) when gamma is set. Variants: 0 y+bias+LN, 1 y+LN, 2 bias+LN,
// 3 y+bias without LN, 4 y only, 5 LN written over x (post-LN).
BACKEND_OP_TEST(AddResidualLayerNorm, "add_residual_layer_norm") {
  for (int64_t rows : {1, 5})
    for (int64_t H : {3, 128, 1000, 9000})
      for (int variant = 0; variant < 6; ++variant) {
        SCOPED_TRACE(dims(rows, H) + " variant " + std::to_string(variant));
        const auto x = random(rows * H), y = random(rows * H), bias = random(H), gamma = random(H), beta = random(H),
                   out0 = random(rows * H);
        const bool use_y = variant != 2, use_bias = variant == 0 || variant == 2 || variant == 3 || variant == 5;
        const bool ln = variant <= 2 || variant == 5, over_x = variant == 5;
        expect_matches(
            [&](ops::Backend& b) {
              Buffers mem(b);
              float* dx = mem.put(x);
              float* out = mem.put(out0);
              b.add_residual_layer_norm(dx, use_y ? mem.put(y) : nullptr, use_bias ? mem.put(bias) : nullptr,
                                        ln ? mem.put(gamma) : nullptr, ln ? mem.put(beta) : nullptr,
                                        ln ? (over_x ? dx : out) : nullptr, rows, H, 1e-6f);
              return Outs{{"x", mem.get(dx, rows * H)}, {"norm_out", mem.get(out, rows * H)}};
            },
            [&] {
              const NormRef sum = residual_ref(x, use_y ? &y : nullptr, use_bias ? &bias : nullptr, rows, H);
              if (!ln) return Outs{{"x", sum.out, sum.scale}, {"norm_out", out0, {}, true}};
              const NormRef n = layer_norm_ref(sum.out, gamma, beta.data(), rows, H, 1e-6f);
              if (over_x) return Outs{{"x", n.out, n.scale}, {"norm_out", out0, {}, true}};
              return Outs{{"x", sum.out, sum.scale}, {"norm_out", n.out, n.scale}};
            },
            kNormTol);
      }
}

// Also rows of a thousandth the size, whose mean square is below eps.
BACKEND_OP_TEST(RmsNorm, "rms_norm") {
  for (int64_t rows : {1, 3, 7})
    for (int64_t H : {1, 5, 64, 257, 9001})
      for (bool in_place : {false, true}) {
        const float size = rows == 3 ? 1e-3f : 1.0f;
        SCOPED_TRACE(dims(rows, H) + " in_place " + std::to_string(in_place));
        const auto x = random(rows * H, -3.0f * size, 5.0f * size), gamma = random(H), out0 = random(rows * H);
        expect_matches(
            [&](ops::Backend& b) {
              Buffers mem(b);
              float* dx = mem.put(x);
              float* dst = in_place ? dx : mem.put(out0);
              b.rms_norm(dst, dx, mem.put(gamma), rows, H, 1e-5f);
              return Outs{{"out", mem.get(dst, rows * H)}, {"x", mem.get(dx, rows * H)}};
            },
            [&] {
              const NormRef r = rms_norm_ref(x, gamma, rows, H, 1e-5f);
              return Outs{{"out", r.out, r.scale}, in_place ? Out{"x", r.out, r.scale} : Out{"x", x, {}, true}};
            },
            kNormTol);
      }
}

// Variants: 0 y+bias+norm, 1 y+norm, 2 y only.
BACKEND_OP_TEST(AddResidualRmsNorm, "add_residual_rms_norm") {
  for (int64_t rows : {1, 5})
    for (int64_t H : {3, 1000, 9000})
      for (int variant = 0; variant < 3; ++variant) {
        SCOPED_TRACE(dims(rows, H) + " variant " + std::to_string(variant));
        const auto x = random(rows * H), y = random(rows * H), bias = random(H), gamma = random(H), out0 = random(rows * H);
        const bool norm = variant < 2;
        expect_matches(
            [&](ops::Backend& b) {
              Buffers mem(b);
              float* dx = mem.put(x);
              float* out = mem.put(out0);
              b.add_residual_rms_norm(dx, mem.put(y), variant == 0 ? mem.put(bias) : nullptr,
                                      norm ? mem.put(gamma) : nullptr, norm ? out : nullptr, rows, H, 1e-6f);
              return Outs{{"x", mem.get(dx, rows * H)}, {"norm_out", mem.get(out, rows * H)}};
            },
            [&] {
              const NormRef sum = residual_ref(x, &y, variant == 0 ? &bias : nullptr, rows, H);
              if (!norm) return Outs{{"x", sum.out, sum.scale}, {"norm_out", out0, {}, true}};
              const NormRef n = rms_norm_ref(sum.out, gamma, rows, H, 1e-6f);
              return Outs{{"x", sum.out, sum.scale}, {"norm_out", n.out, n.scale}};
            },
            kNormTol);
      }
}

// QK-norm: each Q head and each K head of fused QKV rows normalised in place by RMSNorm with its
// own gamma (torch's RMSNorm per head, as Qwen3's q_norm / k_norm), V and a row's padding beyond
// the heads untouched (exactly). MHA, GQA with an odd head_dim, MQA, head_dim 256 and 1; rows padded
// beyond the QKV width; heads of a thousandth the size, whose mean square is below eps.
BACKEND_OP_TEST(HeadRmsNorm, "head_rms_norm") {
  struct Heads {
    int64_t q, kv, d;
  };
  for (const Heads hd : {Heads{4, 4, 16}, Heads{8, 2, 25}, Heads{6, 1, 128}, Heads{2, 1, 256}, Heads{3, 3, 1}})
    for (int64_t rows : {1, 3, 7})
      for (int64_t pad : {0, 5}) {
        const int64_t width = (hd.q + 2 * hd.kv) * hd.d, stride = width + pad;
        const float size = rows == 3 ? 1e-3f : 1.0f;
        SCOPED_TRACE("q_heads " + std::to_string(hd.q) + " kv_heads " + std::to_string(hd.kv) + " head_dim " +
                     std::to_string(hd.d) + " " + dims(rows, stride));
        const auto qkv = random(rows * stride, -3.0f * size, 5.0f * size), gamma_q = random(hd.d),
                   gamma_k = random(hd.d);
        const int64_t qk = (hd.q + hd.kv) * hd.d;  // a row's Q and K elements, first in the row
        // A row's Q and K heads, and the rest (V and the padding), each row after row.
        auto split = [&](const std::vector<float>& all) {
          Outs o{{"Q and K heads", {}}, {"V and padding", {}, {}, true}};
          for (int64_t r = 0; r < rows; ++r) {
            o[0].values.insert(o[0].values.end(), all.begin() + r * stride, all.begin() + r * stride + qk);
            o[1].values.insert(o[1].values.end(), all.begin() + r * stride + qk, all.begin() + (r + 1) * stride);
          }
          return o;
        };
        expect_matches(
            [&](ops::Backend& b) {
              Buffers mem(b);
              float* x = mem.put(qkv);
              b.head_rms_norm(x, rows, stride, hd.q, hd.kv, hd.d, mem.put(gamma_q), mem.put(gamma_k), 1e-6f);
              return split(mem.get(x, rows * stride));
            },
            [&] {
              // Each head on its own through the RMSNorm reference; everything else as it was.
              Outs want = split(qkv);
              want[0].scale.resize(want[0].values.size());
              for (int64_t r = 0; r < rows; ++r)
                for (int64_t h = 0; h < hd.q + hd.kv; ++h) {
                  const size_t at = static_cast<size_t>(r * stride + h * hd.d);
                  const size_t to = static_cast<size_t>(r * qk + h * hd.d);
                  const std::vector<float> head(qkv.begin() + at, qkv.begin() + at + hd.d);
                  const NormRef n = rms_norm_ref(head, h < hd.q ? gamma_q : gamma_k, 1, hd.d, 1e-6);
                  std::copy(n.out.begin(), n.out.end(), want[0].values.begin() + to);
                  std::copy(n.scale.begin(), n.scale.end(), want[0].scale.begin() + to);
                }
              return want;
            },
            kNormTol);
      }
}

// x = cap · tanh(x / cap) over rows × N (Gemma 2's final logit softcapping, cap 30; and a cap
// below the inputs' size, where tanh saturates), against std::tanh in double. Tolerance: the CPU
// 1e-6 of max(1, |x|) (tanhf is within a few ulps), a device 1e-5.
BACKEND_OP_TEST(Softcap, "softcap") {
  for (const float cap : {30.0f, 0.5f})
    for (int64_t rows : {1, 3})
      for (int64_t N : {1, 1000, 9001}) {
        SCOPED_TRACE("cap " + std::to_string(cap) + " " + dims(rows, N));
        const auto x = random(rows * N, -100.0f, 100.0f);
        expect_matches(
            [&](ops::Backend& b) {
              Buffers mem(b);
              float* dx = mem.put(x);
              b.softcap(dx, rows, N, cap);
              return Outs{{"x", mem.get(dx, rows * N)}};
            },
            [&] {
              std::vector<float> want(x.size());
              for (size_t i = 0; i < x.size(); ++i)
                want[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
              return Outs{{"x", want}};
            },
            kNormTol);
      }
}

// x[rows, N] += bias[N]: one fp32 addition per element, so equal to it; a null bias is a no-op.
BACKEND_OP_TEST(AddBias, "add_bias") {
  for (int64_t rows : {1, 4, 9})
    for (int64_t N : {1, 33, 1000}) {
      SCOPED_TRACE(dims(rows, N));
      const auto x = random(rows * N), bias = random(N);
      expect_matches(
          [&](ops::Backend& b) {
            Buffers mem(b);
            float* dx = mem.put(x);
            b.add_bias(dx, mem.put(bias), rows, N);
            b.add_bias(dx, nullptr, rows, N);
            return Outs{{"x", mem.get(dx, rows * N), {}, true}};
          },
          [&] {
            std::vector<float> want = x;
            for (int64_t i = 0; i < rows * N; ++i) want[i] += bias[i % N];
            return Outs{{"x", want, {}, true}};
          },
          kNormTol);
    }
}

// x = act(x + bias), gated: act(x + bias) · (gate + gate_bias); biases may be null.
BACKEND_OP_TEST(BiasActivation, "bias_activation") {
  // kGeGluTanh: Gemma's GeGLU gates the tanh GELU.
  const Activation acts[] = {Activation::kGelu,   Activation::kGeluTanh, Activation::kRelu,
                             Activation::kSilu,   Activation::kSwiGlu,   Activation::kGeGlu,
                             Activation::kGeGluTanh, Activation::kSquaredRelu};
  for (Activation act : acts)
    for (int64_t rows : {1, 3})
      for (int64_t N : {7, 1024})
        for (int flags = 0; flags < 4; ++flags) {
          const bool with_bias = flags & 1, gated = act.is_gated(), with_gate_bias = gated && (flags & 2);
          SCOPED_TRACE(std::string(activation_name(act)) + " " + dims(rows, N) + " flags " + std::to_string(flags));
          const auto x = random(rows * N, -4.0f, 4.0f), bias = random(N), gate = random(rows * N), gate_bias = random(N);
          expect_matches(
              [&](ops::Backend& b) {
                Buffers mem(b);
                float* dx = mem.put(x);
                b.bias_activation(dx, with_bias ? mem.put(bias) : nullptr, gated ? mem.put(gate) : nullptr,
                                  with_gate_bias ? mem.put(gate_bias) : nullptr, rows, N, act);
                return Outs{{"x", mem.get(dx, rows * N)}};
              },
              [&] {
                std::vector<float> want(x.size());
                for (int64_t i = 0; i < rows * N; ++i) {
                  double v = activation_ref(act.nonlinearity(), static_cast<double>(x[i]) + (with_bias ? bias[i % N] : 0.0));
                  if (gated) v *= static_cast<double>(gate[i]) + (with_gate_bias ? gate_bias[i % N] : 0.0);
                  want[i] = static_cast<float>(v);
                }
                return Outs{{"x", want}};
              },
              kNormTol);
        }
}

}  // namespace ftx::test
