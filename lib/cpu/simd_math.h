#pragma once
// Inner loops the CPU backend runs per element, written so the compiler vectorises them: no libm
// calls (expf is scalar in glibc), reductions in explicit lanes. The .cc compiles each for AVX-512,
// AVX2 and baseline and picks one by cpu_isa() (isa_levels.h).
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ftx::cpu {

// e^z for z in [-87, 88] (clamped outside) within 2 ulp. Cody–Waite: z = n·ln2 + r with |r| <=
// ln2/2, e^r by its Taylor series to degree 7 (truncation below 6e-9 relative), 2^n put straight
// into the exponent bits.
inline float exp_approx(float z) {
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

// Σ q[i]·k[i]; the int8 form reads k[i]·scale (each element dequantised, as the KV cache defines).
float dot(const float* q, const float* k, int64_t n);
float dot(const float* q, const int8_t* k, float scale, int64_t n);
// out[i] += w · v[i]; the int8 form adds w · (v[i]·scale).
void axpy(float* out, float w, const float* v, int64_t n);
void axpy(float* out, float w, const int8_t* v, float scale, int64_t n);
// The same over FP8 E4M3 elements (an FP8 KV cache): k[i] read as e4m3_to_float(k[i])·scale.
float dot_e4m3(const float* q, const uint8_t* k, float scale, int64_t n);
void axpy_e4m3(float* out, float w, const uint8_t* v, float scale, int64_t n);
// x[i] = e^(x[i] - shift) for i < n; returns Σ x[i] afterwards (a softmax's numerator and sum).
float exp_shifted_sum(float* x, float shift, int64_t n);

}  // namespace ftx::cpu
