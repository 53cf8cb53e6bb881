#include "lib/cpu/activation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/cpu/isa_levels.h"
#include "lib/cpu/simd_math.h"

namespace ftx::cpu {

namespace {

// 0.5·x·(1 + tanh(y)) is x·sigmoid(2y): the same function without tanh's cancellation near -1.
inline float gelu_tanh(float x) {
  const float y = 0.79788456080286536f * (x + 0.044715f * x * x * x);  // sqrt(2/pi)·(x + 0.044715x³)
  return x / (1.0f + exp_approx(-2.0f * y));
}
inline float silu(float x) { return x / (1.0f + exp_approx(-x)); }
inline float gelu_exact(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

// One loop per activation kind, so each inner loop is branch-free and vectorises, at each level
// (isa_levels.h).
template <bool>
__attribute__((always_inline)) inline void activate_row_levels_t(float* x, const float* bias, const float* gate,
                                                                 const float* gate_bias, int64_t n, Activation act) {
  if (bias)
    for (int64_t i = 0; i < n; ++i) x[i] += bias[i];
  // The gate comes with its pointer: a gated activation differs only there.
  switch (act.nonlinearity()) {
    case Nonlinearity::kGeluErf:
      for (int64_t i = 0; i < n; ++i) x[i] = gelu_exact(x[i]);
      break;
    case Nonlinearity::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = gelu_tanh(x[i]);
      break;
    case Nonlinearity::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case Nonlinearity::kSilu:
      for (int64_t i = 0; i < n; ++i) x[i] = silu(x[i]);
      break;
    case Nonlinearity::kSquaredRelu:  // Megatron Core's squared_relu: relu(x)²
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] * x[i] : 0.0f;
      break;
  }
  if (!gate) return;
  if (gate_bias)
    for (int64_t i = 0; i < n; ++i) x[i] *= gate[i] + gate_bias[i];
  else
    for (int64_t i = 0; i < n; ++i) x[i] *= gate[i];
}

FTX_CPU_LEVELS(void, activate_row_levels,
               (float* x, const float* bias, const float* gate, const float* gate_bias, int64_t n, Activation act),
               (x, bias, gate, gate_bias, n, act))

}  // namespace

float exp_vectorizable(float z) { return exp_approx(z); }

void activate_row(float* x, const float* bias, const float* gate, const float* gate_bias, int64_t n,
                  Activation act) {
  activate_row_levels(x, bias, gate, gate_bias, n, act);
}

}  // namespace ftx::cpu
