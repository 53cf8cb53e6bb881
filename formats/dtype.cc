#include "formats/dtype.h"

#include <cmath>
#include <cstring>

#include "formats/error.h"

namespace ftx {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: case DType::kComplex64: return 8;
    case DType::kComplex128: return 16;
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool:
    case DType::kFloat8E4M3: case DType::kFloat8E5M2: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat64: return "float64";
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kInt16: return "int16";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kFloat8E4M3: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
  }
  return "?";
}

DType dtype_from_name(const std::string& n) {
  if (n == "float32" || n == "fp32" || n == "float") return DType::kFloat32;
  if (n == "float16" || n == "fp16" || n == "half") return DType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DType::kBFloat16;
  if (n == "float64" || n == "fp64" || n == "double") return DType::kFloat64;
  if (n == "int64") return DType::kInt64;
  if (n == "int32") return DType::kInt32;
  if (n == "int16") return DType::kInt16;
  if (n == "int8") return DType::kInt8;
  if (n == "uint8") return DType::kUInt8;
  if (n == "bool") return DType::kBool;
  if (n == "float8_e4m3fn") return DType::kFloat8E4M3;  // what dtype_name writes (manifest.json)
  if (n == "float8_e5m2") return DType::kFloat8E5M2;
  throw Error("unknown data type '" + n + "'");
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::kFloat64: case DType::kFloat32: case DType::kFloat16: case DType::kBFloat16:
    case DType::kFloat8E4M3: case DType::kFloat8E5M2: return true;
    default: return false;
  }
}

static float fp8_to_float(uint8_t v, int exp_bits, int bias, bool e4m3) {
  int mant_bits = 7 - exp_bits;
  int sign = v >> 7, exp = (v >> mant_bits) & ((1 << exp_bits) - 1), mant = v & ((1 << mant_bits) - 1);
  if (e4m3 && exp == 0xf && mant == 0x7) return NAN;
  if (!e4m3 && exp == 0x1f) return mant ? NAN : (sign ? -INFINITY : INFINITY);
  float r = exp == 0 ? std::ldexp(static_cast<float>(mant), 1 - bias - mant_bits)
                     : std::ldexp(1.0f + static_cast<float>(mant) / (1 << mant_bits), exp - bias);
  return sign ? -r : r;
}

double load_as_double(DType t, const void* p) {
  switch (t) {
    case DType::kFloat64: case DType::kComplex128: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::kFloat32: case DType::kComplex64: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kFloat16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case DType::kBFloat16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case DType::kInt64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::kInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kInt16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kInt8: return *static_cast<const int8_t*>(p);
    case DType::kUInt8: return *static_cast<const uint8_t*>(p);
    case DType::kBool: return *static_cast<const uint8_t*>(p) ? 1.0 : 0.0;
    case DType::kUInt16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kUInt32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kUInt64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::kFloat8E4M3: return fp8_to_float(*static_cast<const uint8_t*>(p), 4, 7, true);
    case DType::kFloat8E5M2: return fp8_to_float(*static_cast<const uint8_t*>(p), 5, 15, false);
  }
  return 0;
}

}  // namespace ftx
