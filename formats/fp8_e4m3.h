#pragma once
// FP8 E4M3, the number format (like dtype.h's half and bfloat16): the element codec that the FP8
// weights, activations and KV caches of TensorRT-LLM's FP8 and FP8 KV CACHE are stored in. A floor
// of its own, below ops/ (which quantises K and V with it) and the CPU backend (which widens E4M3
// weights), and below lib/quant/ (which writes the FP8 files: fp8.h there, with the scales).
//
// E4M3 here is the "fn" variant NVIDIA's FP8 GEMMs and KV caches use (OCP FP8, ml_dtypes'
// float8_e4m3fn): 1 sign bit, 4 exponent bits biased by 7, 3 mantissa bits; no infinities; S.1111.111
// is NaN; largest finite ±448 (0x7e), smallest normal 2^-6, subnormal quantum 2^-9.
//
// float_to_e4m3 rounds to nearest, ties to even, and saturates: every finite value beyond ±448 and
// ±infinity give ±448 (PTX cvt.rn.satfinite.e4m3x2.f32, CUDA's __nv_cvt_float_to_fp8(x,
// __NV_SATFINITE, __NV_E4M3)); NaN stays NaN, sign kept (0x7f, 0xff). It equals ml_dtypes' conversion
// of the value clipped to [-448, 448] on every float32 (tests/unit/fp8_e4m3_test.cc: all 2^32 bit
// patterns against the rounding boundaries ml_dtypes gives, and a dense sample against ml_dtypes
// itself). ml_dtypes without the clip turns an overflow into NaN; TensorRT-LLM's kernels saturate.
#include <cstdint>
#include <cstring>

namespace ftx {

constexpr float kE4M3Max = 448.0f;

inline uint8_t float_to_e4m3(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (a >= 0x43e00000u) return sign | 0x7eu;  // >= 448 (and inf): saturate; (448, 464] rounds to 448 too
  if (a >= 0x3c800000u) {                     // >= 2^-6: a normal E4M3
    // Keep 3 of the 23 mantissa bits, rounding the 20 dropped ones to nearest even (a carry into
    // the exponent is the right result), then rebias the exponent from 127 to 7.
    a += 0x7ffffu + ((a >> 20) & 1u);
    return static_cast<uint8_t>(sign | ((a - (120u << 23)) >> 20));
  }
  // Below 2^-6 the E4M3 values are multiples of 2^-9 (subnormals, up to 8·2^-9 = 2^-6). Adding 2^14,
  // whose fp32 ulp is 2^-9, leaves round-to-nearest-even of the count of quanta in the low bits.
  float m;
  std::memcpy(&m, &a, sizeof m);
  const float shifted = m + 16384.0f;
  uint32_t s;
  std::memcpy(&s, &shifted, sizeof s);
  return static_cast<uint8_t>(sign | (s - 0x46800000u));
}

// Every E4M3 code as fp32 (exact): 0x7f and 0xff are NaN.
struct E4M3Table {
  float value[256];
  E4M3Table();
};
extern const E4M3Table kE4M3;
inline float e4m3_to_float(uint8_t q) { return kE4M3.value[q]; }

// The codec's names as lib/cpu/ spells them (quant::), from before it moved here out of lib/quant/.
namespace quant {
using ftx::e4m3_to_float;
using ftx::float_to_e4m3;
using ftx::kE4M3;
using ftx::kE4M3Max;
}  // namespace quant

}  // namespace ftx
