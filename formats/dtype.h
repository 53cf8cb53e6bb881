#pragma once
#include <cstddef>
#include <cstdint>
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
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace ftx
