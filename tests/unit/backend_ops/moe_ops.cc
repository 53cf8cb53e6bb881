// The mixture-of-experts layer (Backend::moe_ffn): a float64 reference written from the contract in
// lib/ops/backend.h (Mixtral's router: softmax over every expert, the top k, renormalised; or kept
// as they are, Qwen2-MoE's norm_topk_prob false), its expert FFNs with SwiGLU and with an ungated
// GELU, FT GPT-MoE's expert biases, Qwen2-MoE's shared expert (with its sigmoid weigher, and
// without one), and the property the engine relies on: a row's output is the same bits whether it
// shares the call with other rows or not (each expert's GEMM sums the same way for any number of rows).
//
// The same layer with the weights a model loads them as: fp16 and bf16 (the GEMMs' A rounded to the
// weights' dtype: the input, and the hidden activation before the down projection) and weight-only
// INT8 (each expert's matrices quantised per column by FT's rule, A rounded to the model's dtype);
// and with whole experts on each of two ranks (expert parallelism: each rank's output covers only
// the choices it holds, and the two sum to the layer).
//
// On a device backend (CUDA, label gpu) MoeFfn's layers, with fp32 and bf16 weights, against the
// CPU backend made with the same weight dtype (its twin), and rows 1 .. 64, top-1 and top-2, with
// and without renormalisation; expert biases and shared experts, which the device has no code for
// yet, refused by name.
//
// Tolerance of an output, relative to Σ_k p_k Σ_i |h_i · proj_ih| (the down projection's magnitude,
// plus the biases' and the shared expert's w Σ_i |s_i · shared_proj_ih|): the CPU 1e-5 against
// float64 (three fp32 GEMMs in a row, the router's softmax in fp32); a device 1e-4 against the CPU
// in fp32 (other summation orders); in bf16 4e-3: the activated h, whose fp32 values differ in the
// last bits between the two, is rounded to bf16 as the down projection's operand, and a value near
// a rounding boundary may round the other way (2^-8 of one term of the ≥ 8 in each sum, a few times
// the average term at worst). Half and
// INT8 cases hold to it too: their inputs and expert weights lie on a grid of small multiples of
// powers of two and the activation is ReLU, so every GEMM sum, the INT8 scales (a power of two: each
// column's largest |w| is 1/2) and the hidden activation are exact in fp32, and rounding the hidden
// activation to fp16/bf16 gives the same value in the reference as in the backend (with SiLU, an
// fp32 ulp of difference can move it across a rounding boundary: a half ulp of one term).
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

// How the backend holds the layer: its weight dtype (the router and the floating-point experts),
// the experts as weight-only INT8, and the experts this rank holds ([begin, begin + count); count 0:
// all).
struct MoeHolding {
  DType weights = DType::kFloat32;
  bool int8 = false;
  int64_t expert_begin = 0, expert_count = 0;
};

std::string holding_name(const MoeHolding& h) {
  return std::string(dtype_name(h.weights)) + (h.int8 ? " int8 experts" : "") +
         (h.expert_count ? " experts [" + std::to_string(h.expert_begin) + ", " +
                               std::to_string(h.expert_begin + h.expert_count) + ")"
                         : "");
}

// out and scale per the file comment, in double: what the GEMMs read is the rounded or dequantised
// value (reference.h's rules), the hidden activation rounded to the dtype the down projection's A
// is rounded to, and only the held experts' terms summed.
Outs moe_ref(const MoeCase& c, const MoeInputs& in0, const MoeHolding& hold = {}) {
  const int64_t H = c.hidden, I = c.inter, E = c.experts;
  const DType t = hold.weights;  // A's rounding: a half weight's dtype, or an INT8 weight's input dtype
  MoeInputs in = in0;
  in.x = round_to(t, in0.x);
  in.router = round_to(t, in0.router);
  auto held_as = [&](const std::vector<float>& w, int64_t rows, int64_t cols) {
    if (!hold.int8) return round_to(t, w);
    const std::vector<double> d = int8_weight_only_values(w, rows, cols, false);
    return std::vector<float>(d.begin(), d.end());  // exact: q · scale with a power-of-two scale
  };
  for (int64_t e = 0; e < E; ++e) {
    in.fc[e] = held_as(in0.fc[e], H, I);
    if (c.act.is_gated()) in.gate[e] = held_as(in0.gate[e], H, I);
    in.proj[e] = held_as(in0.proj[e], I, H);
  }
  // act(x · fc + fc_b) [· (x · gate)], rounded as the down projection's A, · proj + proj_b, in double,
  // and Σ_i |hid_i · proj_ih| (+ |proj_b|) per output (the biases null without).
  auto ffn = [&](const float* x, int64_t width, const std::vector<float>& fc, const std::vector<float>& gate,
                 const std::vector<float>& proj, const float* fc_b, const float* proj_b, std::vector<double>& y,
                 std::vector<double>& mag) {
    std::vector<double> hid(static_cast<size_t>(width));
    for (int64_t i = 0; i < width; ++i) {
      double a = 0, g = 0;
      for (int64_t h = 0; h < H; ++h) {
        a += double(x[h]) * fc[h * width + i];
        if (c.act.is_gated()) g += double(x[h]) * gate[h * width + i];
      }
      if (fc_b) a += fc_b[i];
      hid[i] = round_to(t, static_cast<float>(activation_ref(c.act.nonlinearity(), a) * (c.act.is_gated() ? g : 1.0)));
    }
    y.assign(static_cast<size_t>(H), 0.0);
    mag.assign(static_cast<size_t>(H), 0.0);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < width; ++i) {
        const double term = hid[i] * proj[i * H + h];
        y[h] += term;
        mag[h] += std::fabs(term);
      }
      if (proj_b) {
        y[h] += proj_b[h];
        mag[h] += std::fabs(proj_b[h]);
      }
    }
  };
  const int64_t first = hold.expert_begin, held = hold.expert_count ? hold.expert_count : E;
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
      if (e < first || e >= first + held) continue;  // another rank's
      const double w = c.routing == MoeRouting::kSoftmaxTopKRenorm ? p[e] / chosen : p[e];
      ffn(x, I, in.fc[e], in.gate[e], in.proj[e], c.bias ? &in.fc_b[e * I] : nullptr,
          c.bias ? &in.proj_b[e * H] : nullptr, y, ym);
      for (int64_t h = 0; h < H; ++h) {
        acc[h] += w * y[h];
        mag[h] += w * ym[h];
      }
    }
    if (c.shared_inter > 0) {
      double s = 0;
      for (int64_t h = 0; h < H; ++h) s += double(x[h]) * (c.weigher ? in.weigher[h] : 0.0);
      const double w = c.weigher ? 1.0 / (1.0 + std::exp(-s)) : 1.0;
      ffn(x, c.shared_inter, in.shared_fc, in.shared_gate, in.shared_proj, nullptr, nullptr, y, ym);
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

// The layer on backend b: weights uploaded as the engine loads them (upload_weight_matrix, or
// upload_weight_int8 for INT8 experts; only the held experts), rows [first, first + count) of the
// inputs in one call.
std::vector<float> run_moe(ops::Backend& b, const MoeCase& c, const MoeInputs& in, int64_t first, int64_t count,
                           const MoeHolding& hold = {}) {
  const int64_t H = c.hidden, I = c.inter;
  Buffers mem(b);
  std::vector<ops::Weight> held;
  auto matrix = [&](const std::vector<float>& v, int64_t rows, int64_t cols, bool int8) {
    held.push_back(int8 ? b.upload_weight_int8(v.data(), DType::kFloat32, rows, cols)
                        : b.upload_weight_matrix(v.data(), DType::kFloat32, rows, cols));
    return held.back();
  };
  std::vector<ops::Weight> fc, gate, proj;
  const int64_t n_held = hold.expert_count ? hold.expert_count : c.experts;
  for (int64_t e = hold.expert_begin; e < hold.expert_begin + n_held; ++e) {
    fc.push_back(matrix(in.fc[e], H, I, hold.int8));
    if (c.act.is_gated()) gate.push_back(matrix(in.gate[e], H, I, hold.int8));
    proj.push_back(matrix(in.proj[e], I, H, hold.int8));
  }
  ops::MoeLayer m;
  m.hidden = H;
  m.inter = I;
  m.experts = c.experts;
  m.expert_begin = hold.expert_begin;
  m.expert_count = hold.expert_count;
  m.top_k = c.top_k;
  m.routing = c.routing;
  m.act = c.act;
  m.router = matrix(in.router, H, c.experts, false);  // the router stays floating point
  m.fc = fc.data();
  m.gate = c.act.is_gated() ? gate.data() : nullptr;
  m.proj = proj.data();
  if (c.shared_inter > 0) {
    m.shared_inter = c.shared_inter;
    m.shared_fc = matrix(in.shared_fc, H, c.shared_inter, false);
    if (c.act.is_gated()) m.shared_gate = matrix(in.shared_gate, H, c.shared_inter, false);
    m.shared_proj = matrix(in.shared_proj, c.shared_inter, H, false);
    if (c.weigher) m.shared_weigher = matrix(in.weigher, H, 1, false);
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

MoeInputs random_inputs(OpTest& t, const MoeCase& c) {
  MoeInputs in;
  in.x = t.random(static_cast<size_t>(c.rows * c.hidden));
  in.router = t.random(static_cast<size_t>(c.hidden * c.experts));
  for (int64_t e = 0; e < c.experts; ++e) {
    in.fc.push_back(t.random(static_cast<size_t>(c.hidden * c.inter)));
    in.gate.push_back(c.act.is_gated() ? t.random(static_cast<size_t>(c.hidden * c.inter)) : std::vector<float>{});
    in.proj.push_back(t.random(static_cast<size_t>(c.inter * c.hidden)));
  }
  if (c.shared_inter > 0) {
    in.shared_fc = t.random(static_cast<size_t>(c.hidden * c.shared_inter));
    if (c.act.is_gated()) in.shared_gate = t.random(static_cast<size_t>(c.hidden * c.shared_inter));
    in.shared_proj = t.random(static_cast<size_t>(c.shared_inter * c.hidden));
    in.weigher = t.random(static_cast<size_t>(c.hidden));
  }
  if (c.bias) {
    in.fc_b = t.random(static_cast<size_t>(c.experts * c.inter));
    in.proj_b = t.random(static_cast<size_t>(c.experts * c.hidden));
  }
  return in;
}

// Inputs on the grid of the file comment: x in {-8..8}/8, expert weights in {-8..8}/16 with each
// column's largest |w| 1/2 (its first row); the router random.
MoeInputs grid_inputs(OpTest& t, const MoeCase& c) {
  auto grid = [&](int64_t rows, int64_t cols, float unit) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& x : v) x = static_cast<float>(t.random_int(-8, 8)) * unit;
    for (int64_t j = 0; j < cols; ++j) v[static_cast<size_t>(j)] = t.random_int(0, 1) ? 0.5f : -0.5f;
    return v;
  };
  MoeInputs in;
  in.x = grid(c.rows, c.hidden, 0.125f);
  in.router = t.random(static_cast<size_t>(c.hidden * c.experts));
  for (int64_t e = 0; e < c.experts; ++e) {
    in.fc.push_back(grid(c.hidden, c.inter, 0.0625f));
    in.gate.push_back(c.act.is_gated() ? grid(c.hidden, c.inter, 0.0625f) : std::vector<float>{});
    in.proj.push_back(grid(c.inter, c.hidden, 0.0625f));
  }
  return in;
}

// Each row alone gives the bits it gets in company.
void expect_batch_independent(ops::Backend& b, const MoeCase& c, const MoeInputs& in, const MoeHolding& hold = {}) {
  const std::vector<float> together = run_moe(b, c, in, 0, c.rows, hold);
  for (int64_t r = 0; r < c.rows; ++r) {
    const std::vector<float> alone = run_moe(b, c, in, r, 1, hold);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + r * c.hidden))
        << "row " << r << " differs when run alone";
  }
}

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
      // bf16 experts on the CPU: MoeFfnQuantisedExperts's (grid inputs, where a float64 reference
      // can round as each GEMM rounds); on a device the CPU backend with bf16 weights is the reference.
      if (t != DType::kFloat32 && on_cpu()) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + case_name(c));
      const MoeInputs in = random_inputs(*this, c);
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
      if (on_cpu()) expect_batch_independent(be({t}), c, in);
    }
}

// Half and weight-only INT8 experts (fp32, fp16 and bf16 models), against the float64 reference on
// grid inputs and, on random ones, each row alone the same bits as in company.
BACKEND_OP_TEST(MoeFfnQuantisedExperts, "moe_ffn", "upload_weight_matrix", "upload_weight_int8", "release_weight") {
  // A device's half and int8 experts are MoeFfn's bf16 cases against its CPU twin (the harness
  // fails a test that returns without calling the ops it names, so this one says it skipped).
  if (!on_cpu()) GTEST_SKIP() << "a device's quantised experts: MoeFfn's bf16 cases";
  const MoeCase cases[] = {
      {1, 16, 8, 4, 2, Activation::kRelu, MoeRouting::kSoftmaxTopKRenorm},
      {9, 48, 32, 4, 2, Activation::kRelu, MoeRouting::kSoftmaxTopKRenorm},
      {23, 64, 40, 8, 2, Activation::kRelu, MoeRouting::kSoftmaxTopK},  // past the streaming kernel's rows
  };
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (bool int8 : {false, true}) {
      if (t == DType::kFloat32 && !int8) continue;  // MoeFfn's
      const MoeHolding hold{t, int8};
      for (const MoeCase& c : cases) {
        SCOPED_TRACE(case_name(c) + " " + holding_name(hold));
        const MoeInputs in = grid_inputs(*this, c);
        expect_matches({t}, [&](ops::Backend& b) { return Outs{{"out", run_moe(b, c, in, 0, c.rows, hold)}}; },
                       [&] { return moe_ref(c, in, hold); }, kMoeTol);
        MoeCase gated = c;
        gated.act = Activation::kSwiGlu;
        expect_batch_independent(be({t}), gated, random_inputs(*this, gated), hold);
      }
    }
}

// Whole experts on two ranks (MoeLayer::expert_begin/expert_count): each rank's output is the
// reference over the experts it holds, the two sum to the whole layer's, and a row is the same alone.
BACKEND_OP_TEST(MoeFfnExpertParallel, "moe_ffn", "upload_weight_matrix", "release_weight") {
  if (!on_cpu()) GTEST_SKIP() << "no expert parallelism on a device yet (its moe_ffn refuses it by name)";
  const MoeCase cases[] = {
      {9, 48, 32, 4, 2, Activation::kSwiGlu, MoeRouting::kSoftmaxTopKRenorm},
      {23, 64, 40, 8, 2, Activation::kSwiGlu, MoeRouting::kSoftmaxTopKRenorm},
      {10, 32, 16, 8, 3, Activation::kGelu, MoeRouting::kSoftmaxTopK},
  };
  for (const MoeCase& c : cases) {
    const MoeInputs in = random_inputs(*this, c);
    std::vector<double> sum(static_cast<size_t>(c.rows * c.hidden), 0.0);
    for (int64_t r = 0; r < 2; ++r) {
      const MoeHolding hold{DType::kFloat32, false, r * c.experts / 2, c.experts / 2};
      SCOPED_TRACE(case_name(c) + " " + holding_name(hold));
      expect_matches([&](ops::Backend& b) { return Outs{{"out", run_moe(b, c, in, 0, c.rows, hold)}}; },
                     [&] { return moe_ref(c, in, hold); }, kMoeTol);
      expect_batch_independent(be(), c, in, hold);
      const std::vector<float> part = run_moe(be(), c, in, 0, c.rows, hold);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
    SCOPED_TRACE(case_name(c) + " two ranks summed");
    const Outs want = moe_ref(c, in);
    EXPECT_TRUE(matches({{"out", std::vector<float>(sum.begin(), sum.end())}}, want, kMoeTol.cpu, false));
  }
}

}  // namespace ftx::test
