// The CPU activations' vectorisable exp and each activation kind against double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lib/cpu/activation.h"
#include "lib/model/model_config.h"

namespace ftx::cpu {
namespace {

TEST(CpuActivation, ExpWithinTwoUlpOverItsRange) {
  double worst = 0.0;
  for (float z = -87.0f; z <= 88.0f; z += 0.0137f) {
    const double want = std::exp(static_cast<double>(z));
    worst = std::max(worst, std::fabs(exp_vectorizable(z) - want) / want);
  }
  EXPECT_LT(worst, 2.5e-7);  // 2 ulp of a float is 2.4e-7 relative at worst
  EXPECT_FLOAT_EQ(exp_vectorizable(0.0f), 1.0f);
  // Outside the range it saturates instead of overflowing to inf or producing garbage bits.
  EXPECT_TRUE(std::isfinite(exp_vectorizable(1000.0f)));
  EXPECT_GE(exp_vectorizable(-1000.0f), 0.0f);
}

double gelu_tanh_ref(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

// Each kind over [-12, 12] with a bias and (gated kinds) a gate and gate bias, against double.
TEST(CpuActivation, EveryKindMatchesDoubleFormulas) {
  const int64_t n = 2401;
  std::vector<float> base(n), bias(n), gate(n), gate_bias(n);
  for (int64_t i = 0; i < n; ++i) {
    base[i] = -12.0f + 0.01f * static_cast<float>(i) - 0.003f;
    bias[i] = 0.003f;
    gate[i] = 0.5f + 0.001f * static_cast<float>(i % 7);
    gate_bias[i] = -0.25f;
  }
  struct Case {
    Activation act;
    double (*f)(double);
    bool gated;
  };
  const Case cases[] = {{Activation::kGelu, gelu_ref, false},      {Activation::kGeluTanh, gelu_tanh_ref, false},
                        {Activation::kSilu, silu_ref, false},      {Activation::kSwiGlu, silu_ref, true},
                        {Activation::kGeGlu, gelu_ref, true},      {Activation::kGeGluTanh, gelu_tanh_ref, true},
                        {Activation::kRelu, [](double x) { return x > 0 ? x : 0.0; }, false},
                        {Activation::kSquaredRelu, [](double x) { return x > 0 ? x * x : 0.0; }, false}};
  for (const Case& c : cases) {
    std::vector<float> x = base;
    activate_row(x.data(), bias.data(), c.gated ? gate.data() : nullptr, c.gated ? gate_bias.data() : nullptr, n,
                 c.act);
    for (int64_t i = 0; i < n; ++i) {
      const double in = static_cast<double>(base[i]) + bias[i];
      double want = c.f(in);
      if (c.gated) want *= static_cast<double>(gate[i]) + gate_bias[i];
      // A few float roundings of values up to 12: 4e-7 relative to the larger of |want| and 1.
      ASSERT_NEAR(x[i], want, 4e-7 * std::max(1.0, std::fabs(want)))
          << activation_name(c.act) << " at x = " << in;
    }
  }
}

}  // namespace

}  // namespace ftx::cpu
