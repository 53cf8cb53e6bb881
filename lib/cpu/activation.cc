#include "lib/cpu/activation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ftx::cpu {

namespace {

// Cody–Waite: z = n·ln2 + r with |r| <= ln2/2, e^r by its Taylor series to degree 7 (truncation
// below 6e-9 relative), then 2^n put straight into the exponent bits.
inline float exp_inline(float z) {
  z = std::min(std::max(z, -87.0f), 88.0f);
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding and subtracting it rounds to an integer
  const float n = (z * 1.44269504088896341f + kRound) - kRound;
  const float r = (z - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;  // ln2 split hi/lo
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// 0.5·x·(1 + tanh(y)) is x·sigmoid(2y): the same function without tanh's cancellation near -1.
inline float gelu_tanh(float x) {
  const float y = 0.79788456080286536f * (x + 0.044715f * x * x * x);  // sqrt(2/pi)·(x + 0.044715x³)
  return x / (1.0f + exp_inline(-2.0f * y));
}
inline float silu(float x) { return x / (1.0f + exp_inline(-x)); }
inline float gelu_exact(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

}  // namespace

float exp_vectorizable(float z) { return exp_inline(z); }

// One loop per activation kind, so each inner loop is branch-free and vectorises; target_clones
// picks AVX-512 (x86-64-v4) or AVX2 (v3) when the binary loads.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void activate_row(float* x, const float* bias, const float* gate, const float* gate_bias, int64_t n,
                  Activation act) {
  if (bias)
    for (int64_t i = 0; i < n; ++i) x[i] += bias[i];
  switch (act) {
    case Activation::kGelu:
    case Activation::kGeGlu:
      for (int64_t i = 0; i < n; ++i) x[i] = gelu_exact(x[i]);
      break;
    case Activation::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = gelu_tanh(x[i]);
      break;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case Activation::kSilu:
    case Activation::kSwiGlu:
      for (int64_t i = 0; i < n; ++i) x[i] = silu(x[i]);
      break;
  }
  if (!gate) return;
  if (gate_bias)
    for (int64_t i = 0; i < n; ++i) x[i] *= gate[i] + gate_bias[i];
  else
    for (int64_t i = 0; i < n; ++i) x[i] *= gate[i];
}

}  // namespace ftx::cpu
