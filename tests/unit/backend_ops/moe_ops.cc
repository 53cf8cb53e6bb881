// The mixture-of-experts layer (Backend::moe_ffn): a float64 reference written from the contract in
// lib/ops/backend.h (Mixtral's router: softmax over every expert, the top k, renormalised; or kept
// as they are, Qwen2-MoE's norm_topk_prob false), its expert FFNs with SwiGLU and with an ungated
// GELU, FT GPT-MoE's expert biases, Qwen2-MoE's shared expert (with its sigmoid weigher, and
// without one), and the property the engine relies on: a row's output is the same bits whether it
// shares the call with other rows or not (each expert's GEMM sums the same way for any number of rows).
//
// On a device backend (CUDA, label gpu) the same layers, with fp32 and bf16 weights, against the
// CPU backend made with the same weight dtype (its twin), rows 1 .. 64, top-1 and top-2, with and
// without renormalisation; expert biases and shared experts, which the device has no code for yet,
// refused by name.
//
// Tolerance of an output, relative to Σ_k p_k Σ_i |h_i · proj_ih| (the down projection's magnitude,
// plus the shared expert's w Σ_i |s_i · shared_proj_ih|):
// the CPU 1e-5 against float64 (three fp32 GEMMs in a row, the router's softmax in fp32); a device
// 1e-4 against the CPU in fp32 (other summation orders); in bf16 4e-3: the activated h, whose fp32
// values differ in the last bits between the two, is rounded to bf16 as the down projection's
// operand, and a value near a rounding boundary may round the other way (2^-8 of one term of the
// ≥ 8 in each sum, a few times the average term at worst).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "formats/error.h"
#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"

namespace ftx::test {
namespace {

constexpr Tol kMoeTol{1e-5, 1e-4};
constexpr Tol kMoeBf16Tol{1e-5, 4e-3};  // the device's only: the CPU instance runs bf16 on no reference

struct MoeCase {
  int64_t rows, hidden, inter, experts, top_k;
  Activation act;
  MoeRouting routing;
  int64_t shared_inter = 0;  // > 0: a shared expert
  bool weigher = true;       // with a shared expert: its sigmoid gate
  bool bias = false;         // FT GPT-MoE's expert biases (Megatron-DeepSpeed's experts)
};

std::string case_name(const MoeCase& c) {
  return "rows " + std::to_string(c.rows) + " H " + std::to_string(c.hidden) + " I " + std::to_string(c.inter) +
         " E " + std::to_string(c.experts) + " k " + std::to_string(c.top_k) + (c.act.is_gated() ? " gated" : "") +
         (c.routing == MoeRouting::kSoftmaxTopK ? " no renorm" : "") +
         (c.shared_inter > 0 ? " shared " + std::to_string(c.shared_inter) + (c.weigher ? " weighed" : "") : "") +
         (c.bias ? " biases" : "");
}

struct MoeInputs {
  std::vector<float> x, router;
  std::vector<std::vector<float>> fc, gate, proj;  // per expert
  std::vector<float> shared_fc, shared_gate, shared_proj, weigher;
  std::vector<float> fc_b, proj_b;  // [E, I], [E, H]; empty without biases
};

// act(x · fc + fc_b) [· (x · gate)] · proj + proj_b of one row, in double, and Σ_i |hid_i · proj_ih|
// (+ |proj_b|) per output; the biases null without.
void ffn_ref(const float* x, int64_t H, int64_t I, Activation act, const std::vector<float>& fc,
             const std::vector<float>& gate, const std::vector<float>& proj, std::vector<double>& y,
             std::vector<double>& mag, const float* fc_b = nullptr, const float* proj_b = nullptr) {
  std::vector<double> hid(static_cast<size_t>(I));
  for (int64_t i = 0; i < I; ++i) {
    double a = 0, g = 0;
    for (int64_t h = 0; h < H; ++h) {
      a += double(x[h]) * fc[h * I + i];
      if (act.is_gated()) g += double(x[h]) * gate[h * I + i];
    }
    if (fc_b) a += fc_b[i];
    hid[i] = activation_ref(act.nonlinearity(), a) * (act.is_gated() ? g : 1.0);
  }
  y.assign(static_cast<size_t>(H), 0.0);
  mag.assign(static_cast<size_t>(H), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < I; ++i) {
      const double term = hid[i] * proj[i * H + h];
      y[h] += term;
      mag[h] += std::fabs(term);
    }
    if (proj_b) {
      y[h] += proj_b[h];
      mag[h] += std::fabs(proj_b[h]);
    }
  }
}

// out and scale per the file comment, in double.
Outs moe_ref(const MoeCase& c, const MoeInputs& in) {
  const int64_t H = c.hidden, I = c.inter, E = c.experts;
  std::vector<float> out(static_cast<size_t>(c.rows * H));
  std::vector<double> scale(out.size());
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* x = &in.x[r * H];
    std::vector<double> l(static_cast<size_t>(E), 0.0);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t h = 0; h < H; ++h) l[e] += double(x[h]) * in.router[h * E + e];
    const double top = *std::max_element(l.begin(), l.end());
    std::vector<double> p(l.size());
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(l[e] - top);
    for (double& v : p) v /= sum;
    std::vector<int64_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int64_t k = 0; k < c.top_k; ++k) chosen += p[order[k]];
    std::vector<double> acc(static_cast<size_t>(H), 0.0), mag(static_cast<size_t>(H), 0.0), y, ym;
    for (int64_t k = 0; k < c.top_k; ++k) {
      const int64_t e = order[k];
      const double w = c.routing == MoeRouting::kSoftmaxTopKRenorm ? p[e] / chosen : p[e];
      ffn_ref(x, H, I, c.act, in.fc[e], in.gate[e], in.proj[e], y, ym, c.bias ? &in.fc_b[e * I] : nullptr,
              c.bias ? &in.proj_b[e * H] : nullptr);
      for (int64_t h = 0; h < H; ++h) {
        acc[h] += w * y[h];
        mag[h] += w * ym[h];
      }
    }
    if (c.shared_inter > 0) {
      double s = 0;
      for (int64_t h = 0; h < H; ++h) s += double(x[h]) * (c.weigher ? in.weigher[h] : 0.0);
      const double w = c.weigher ? 1.0 / (1.0 + std::exp(-s)) : 1.0;
      ffn_ref(x, H, c.shared_inter, c.act, in.shared_fc, in.shared_gate, in.shared_proj, y, ym);
      for (int64_t h = 0; h < H; ++h) {
        acc[h] += w * y[h];
        mag[h] += w * ym[h];
      }
    }
    for (int64_t h = 0; h < H; ++h) {
      out[r * H + h] = static_cast<float>(acc[h]);
      scale[r * H + h] = mag[h];
    }
  }
  return Outs{{"out", out, scale}};
}

// The layer on backend b: weights uploaded as the engine loads them (upload_weight_matrix), rows
// [first, first + count) of the inputs in one call.
std::vector<float> run_moe(ops::Backend& b, const MoeCase& c, const MoeInputs& in, int64_t first, int64_t count) {
  const int64_t H = c.hidden, I = c.inter;
  Buffers mem(b);
  std::vector<ops::Weight> held;
  auto matrix = [&](const std::vector<float>& v, int64_t rows, int64_t cols) {
    held.push_back(b.upload_weight_matrix(v.data(), DType::kFloat32, rows, cols));
    return held.back();
  };
  std::vector<ops::Weight> fc, gate, proj;
  for (int64_t e = 0; e < c.experts; ++e) {
    fc.push_back(matrix(in.fc[e], H, I));
    if (c.act.is_gated()) gate.push_back(matrix(in.gate[e], H, I));
    proj.push_back(matrix(in.proj[e], I, H));
  }
  ops::MoeLayer m;
  m.hidden = H;
  m.inter = I;
  m.experts = c.experts;
  m.top_k = c.top_k;
  m.routing = c.routing;
  m.act = c.act;
  m.router = matrix(in.router, H, c.experts);
  m.fc = fc.data();
  m.gate = c.act.is_gated() ? gate.data() : nullptr;
  m.proj = proj.data();
  if (c.shared_inter > 0) {
    m.shared_inter = c.shared_inter;
    m.shared_fc = matrix(in.shared_fc, H, c.shared_inter);
    if (c.act.is_gated()) m.shared_gate = matrix(in.shared_gate, H, c.shared_inter);
    m.shared_proj = matrix(in.shared_proj, c.shared_inter, H);
    if (c.weigher) m.shared_weigher = matrix(in.weigher, H, 1);
  }
  if (c.bias) {
    m.fc_bias = mem.put(in.fc_b);
    m.proj_bias = mem.put(in.proj_b);
  }
  float* x = mem.put({in.x.begin() + first * H, in.x.begin() + (first + count) * H});
  float* out = mem.alloc(static_cast<size_t>(count * H));
  b.moe_ffn(out, x, count, m);
  std::vector<float> got = mem.get(out, static_cast<size_t>(count * H));
  for (const ops::Weight& w : held) b.release_weight(w);
  return got;
}

}  // namespace

BACKEND_OP_TEST(MoeFfn, "moe_ffn", "upload_weight_matrix", "release_weight") {
  std::vector<MoeCase> cases = {
      {1, 16, 8, 4, 2, Activation::kSwiGlu, MoeRouting::kSoftmaxTopKRenorm},
      {9, 48, 32, 4, 2, Activation::kSwiGlu, MoeRouting::kSoftmaxTopKRenorm},
      {23, 64, 40, 8, 2, Activation::kSwiGlu, MoeRouting::kSoftmaxTopKRenorm},  // past the streaming kernel's rows
      {7, 32, 24, 6, 1, Activation::kSwiGlu, MoeRouting::kSoftmaxTopKRenorm},
      {11, 32, 24, 5, 5, Activation::kGelu, MoeRouting::kSoftmaxTopKRenorm},  // every expert, ungated
      {10, 32, 16, 8, 3, Activation::kSwiGlu, MoeRouting::kSoftmaxTopK},
      // Qwen2-MoE: not renormalised, a shared expert of another width weighed by its sigmoid gate.
      {13, 48, 16, 6, 2, Activation::kSwiGlu, MoeRouting::kSoftmaxTopK, 40},
      {5, 32, 8, 4, 2, Activation::kSwiGlu, MoeRouting::kSoftmaxTopKRenorm, 24, false},
      {9, 32, 16, 4, 1, Activation::kGelu, MoeRouting::kSoftmaxTopK, 8},
      // FT GPT-MoE's biases (Megatron-DeepSpeed's top-2 and top-1 gates).
      {13, 32, 24, 4, 2, Activation::kGelu, MoeRouting::kSoftmaxTopKRenorm, 0, true, true},
      {6, 32, 24, 4, 1, Activation::kGelu, MoeRouting::kSoftmaxTopK, 0, true, true},
  };
  if (!on_cpu())  // the device against its CPU twin: rows 1 .. 64, top-1 and top-2, renormalised or not
    for (int64_t rows : {1, 2, 5, 8, 17, 33, 64})
      for (int64_t k : {1, 2})
        for (MoeRouting r : {MoeRouting::kSoftmaxTopKRenorm, MoeRouting::kSoftmaxTopK})
          cases.push_back({rows, 64, 48, 8, k, Activation::kSwiGlu, r});
  for (DType t : {DType::kFloat32, DType::kBFloat16})
    for (const MoeCase& c : cases) {
      // bf16 experts on the CPU have no reference here (a float64 one would have to round as each
      // GEMM rounds); on a device the CPU backend with bf16 weights is the reference.
      if (t != DType::kFloat32 && on_cpu()) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + case_name(c));
      MoeInputs in;
      in.x = random(static_cast<size_t>(c.rows * c.hidden));
      in.router = random(static_cast<size_t>(c.hidden * c.experts));
      for (int64_t e = 0; e < c.experts; ++e) {
        in.fc.push_back(random(static_cast<size_t>(c.hidden * c.inter)));
        in.gate.push_back(c.act.is_gated() ? random(static_cast<size_t>(c.hidden * c.inter)) : std::vector<float>{});
        in.proj.push_back(random(static_cast<size_t>(c.inter * c.hidden)));
      }
      if (c.shared_inter > 0) {
        in.shared_fc = random(static_cast<size_t>(c.hidden * c.shared_inter));
        if (c.act.is_gated()) in.shared_gate = random(static_cast<size_t>(c.hidden * c.shared_inter));
        in.shared_proj = random(static_cast<size_t>(c.shared_inter * c.hidden));
        in.weigher = random(static_cast<size_t>(c.hidden));
      }
      if (c.bias) {
        in.fc_b = random(static_cast<size_t>(c.experts * c.inter));
        in.proj_b = random(static_cast<size_t>(c.experts * c.hidden));
      }
      if (!on_cpu() && (c.bias || c.shared_inter > 0)) {  // not on a device yet: refused by name
        try {
          run_moe(be({t}), c, in, 0, c.rows);
          ADD_FAILURE() << "the " << be({t}).name() << " backend's moe_ffn did not refuse " << case_name(c);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(c.bias ? "biases" : "shared expert"), std::string::npos) << e.what();
        }
        continue;
      }
      expect_matches({t}, [&](ops::Backend& b) { return Outs{{"out", run_moe(b, c, in, 0, c.rows)}}; },
                     [&] { return moe_ref(c, in); }, t == DType::kFloat32 ? kMoeTol : kMoeBf16Tol);
      // Each row alone gives the bits it gets in company: the CPU's GEMMs sum the same way for any
      // number of rows. cuBLASLt picks its kernels (and split-K) by M, so a device promises only the
      // tolerance above for any company (checked by the cases of every row count).
      if (!on_cpu()) continue;
      const std::vector<float> together = run_moe(be({t}), c, in, 0, c.rows);
      for (int64_t r = 0; r < c.rows; ++r) {
        const std::vector<float> alone = run_moe(be({t}), c, in, r, 1);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + r * c.hidden))
            << "row " << r << " differs when run alone";
      }
    }
}

}  // namespace ftx::test
