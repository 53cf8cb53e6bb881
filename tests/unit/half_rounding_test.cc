// The vectorised activation rounding (lib/cpu/half_rounding.h) against formats/dtype.h's scalar
// definitions, on every kind of float: random bit patterns (NaN, infinities, denormals, values
// that overflow fp16 or sit on its rounding boundaries), and lengths that end inside a vector.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "lib/cpu/half_rounding.h"

namespace ftx::cpu {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

std::vector<float> every_kind(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0: x[i] = from_bits(rng()); break;                                            // anything, NaNs included
      case 1: x[i] = std::ldexp(static_cast<float>(rng() % 4096) + 0.5f, -static_cast<int>(rng() % 40)); break;  // halves
      case 2: x[i] = from_bits((rng() & 0x807fffffu) | ((112u + rng() % 32) << 23)); break;  // around fp16's range
      default: x[i] = from_bits(rng() & 0x807fffffu); break;                                  // float denormals
    }
  }
  x[0] = 65519.0f, x[1] = 65520.0f, x[2] = -65504.0f, x[3] = std::ldexp(1.0f, -25);  // fp16 max, overflow, min quantum/2
  return x;
}

void expect_same(float got, float want, size_t i, float in) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << i << ": " << in;
    return;
  }
  ASSERT_EQ(bits_of(got), bits_of(want)) << i << ": " << in << " -> " << got << " want " << want;
}

TEST(HalfRounding, Fp16EqualsTheScalarDefinition) {
  for (size_t n : {1u, 15u, 17u, 100003u}) {
    const std::vector<float> x = every_kind(n, static_cast<uint32_t>(n));
    std::vector<float> got(n + 1, 7.0f);
    round_through_fp16(x.data(), n, got.data());
    for (size_t i = 0; i < n; ++i) expect_same(got[i], half_to_float(float_to_half(x[i])), i, x[i]);
    EXPECT_EQ(got[n], 7.0f) << "wrote past the end, n = " << n;
  }
}

TEST(HalfRounding, Bf16EqualsTheScalarDefinition) {
  for (size_t n : {1u, 15u, 17u, 100003u}) {
    const std::vector<float> x = every_kind(n, 99u + static_cast<uint32_t>(n));
    std::vector<float> got(n + 1, 7.0f);
    round_through_bf16(x.data(), n, got.data());
    std::vector<uint16_t> b(n + 1, 0xABCD);
    to_bf16(x.data(), n, b.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(b[i], float_to_bf16(x[i])) << i << ": " << x[i];  // NaNs too: the same quiet bits
      expect_same(got[i], bf16_to_float(float_to_bf16(x[i])), i, x[i]);
    }
    EXPECT_EQ(got[n], 7.0f);
    EXPECT_EQ(b[n], 0xABCD);
  }
}

// Gemma's embedding normaliser sqrt(hidden_size), cast to the weights' dtype as transformers does
// (torch.tensor(hidden_size**0.5, dtype=...)): values torch prints for these casts.
TEST(HalfRounding, I46_ConstantRoundedToTheWeightsDtype) {
  EXPECT_EQ(round_to_dtype(std::sqrt(48.0), DType::kBFloat16), 6.9375);
  EXPECT_EQ(round_to_dtype(std::sqrt(48.0), DType::kFloat16), 6.9296875);
  EXPECT_EQ(round_to_dtype(std::sqrt(2304.0), DType::kBFloat16), 48.0);
  EXPECT_EQ(round_to_dtype(std::sqrt(3584.0), DType::kBFloat16), 59.75);
  EXPECT_EQ(round_to_dtype(std::sqrt(48.0), DType::kFloat32), static_cast<double>(static_cast<float>(std::sqrt(48.0))));
}

}  // namespace
}  // namespace ftx::cpu
