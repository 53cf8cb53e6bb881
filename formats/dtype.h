#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace ftx {

// Element types of tensors in every supported file format.
enum class DType : uint8_t {
  kFloat64, kFloat32, kFloat16, kBFloat16,
  kInt64, kInt32, kInt16, kInt8, kUInt8, kBool,
  kUInt16, kUInt32, kUInt64,
  kFloat8E4M3, kFloat8E5M2,
  kComplex64, kComplex128,
};

size_t dtype_size(DType t);
// torch spelling: float32, float16, bfloat16, int8, uint8, bool, ...
const char* dtype_name(DType t);
// Parses torch spellings and the FT/TRT-LLM aliases fp32/fp16/bf16/float/half. Throws Error.
DType dtype_from_name(const std::string& name);
bool dtype_is_float(DType t);

// Reads one element at `p` as double (complex: real part). Little-endian storage is assumed.
double load_as_double(DType t, const void* p);

// IEEE half / bfloat16 conversions (round to nearest even), shared by converters and the engine.
// Inline: converters and the CPU engine call them once per element of every weight.
inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absx < 0x38800000u) {  // subnormal half or zero: round via float arithmetic
    float a;
    std::memcpy(&a, &absx, 4);
    // 2^-24 is the half subnormal quantum; adding 0.5f shifts the value so that the float's own
    // round-to-nearest-even lands the quantum count in the low mantissa bits.
    float shifted = a + 0.5f;
    uint32_t s;
    std::memcpy(&s, &shifted, 4);
    return static_cast<uint16_t>(sign | (s - 0x3f000000u));
  }
  uint32_t mant_odd = (absx >> 13) & 1u;
  absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (absx >> 13));
}

inline float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// `v` as a float of type `t` holds it (fp32, fp16, bf16; other types: v): a constant that a model
// multiplies in its weights' dtype, as transformers casts Gemma's embedding normaliser
// sqrt(hidden_size) (bf16: sqrt(48) = 6.928... -> 6.9375). Rounded through fp32, which for such
// constants is the same as rounding once.
inline double round_to_dtype(double v, DType t) {
  const float f = static_cast<float>(v);
  if (t == DType::kFloat32) return f;
  if (t == DType::kFloat16) return half_to_float(float_to_half(f));
  if (t == DType::kBFloat16) return bf16_to_float(float_to_bf16(f));
  return v;
}


}  // namespace ftx
