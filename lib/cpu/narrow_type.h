#pragma once
// How each weight type of the widening GEMMs (widening_gemm.h) becomes fp32, one element at a time
// (the vector levels' widening loads are in simd_vec.h, chosen by widening_kernels.h's wide<>). A
// new weight type is one specialisation here and one widening load per level.
#include <cstdint>

#include "formats/dtype.h"
#include "formats/fp8_e4m3.h"
#include "lib/cpu/widening_gemm.h"

namespace ftx::cpu {

template <NarrowType>
struct Narrow;

template <>
struct Narrow<NarrowType::kInt8> {
  using T = int8_t;
  static float one(const T* p) { return static_cast<float>(*p); }
};

template <>
struct Narrow<NarrowType::kFp32> {
  using T = float;
  static float one(const T* p) { return *p; }
};

template <>
struct Narrow<NarrowType::kFp16> {
  using T = uint16_t;
  static float one(const T* p) { return half_to_float(*p); }
};

template <>
struct Narrow<NarrowType::kBf16> {
  using T = uint16_t;
  static float one(const T* p) { return bf16_to_float(*p); }
};

template <>
struct Narrow<NarrowType::kFp8E4M3> {
  using T = uint8_t;
  static float one(const T* p) { return quant::e4m3_to_float(*p); }
};

// Calls f(Narrow<type>{}): where a run-time NarrowType becomes its compile-time rule.
template <class F>
decltype(auto) with_narrow(NarrowType type, F&& f) {
  switch (type) {
    case NarrowType::kInt8: return f(Narrow<NarrowType::kInt8>{});
    case NarrowType::kFp16: return f(Narrow<NarrowType::kFp16>{});
    case NarrowType::kBf16: return f(Narrow<NarrowType::kBf16>{});
    case NarrowType::kFp8E4M3: return f(Narrow<NarrowType::kFp8E4M3>{});
    case NarrowType::kFp32: break;
  }
  return f(Narrow<NarrowType::kFp32>{});
}

}  // namespace ftx::cpu
