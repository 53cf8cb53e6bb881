#include "lib/ops/op_types.h"

#include <string>

#include "formats/error.h"

namespace ftx::ops {

const float* Weight::fp32() const {
  if (dtype != DType::kFloat32)
    throw Error(std::string("internal: an fp32 weight was expected, this one is ") + dtype_name(dtype));
  return static_cast<const float*>(data);
}

float* KvCache::fp32() const {
  if (dtype != DType::kFloat32)
    throw Error(std::string("internal: an fp32 KV cache was expected, this one is ") + dtype_name(dtype));
  return static_cast<float*>(data);
}

int8_t* KvCache::int8() const {
  if (dtype != DType::kInt8)
    throw Error(std::string("internal: an int8 KV cache was expected, this one is ") + dtype_name(dtype));
  return static_cast<int8_t*>(data);
}

uint8_t* KvCache::fp8() const {
  if (dtype != DType::kFloat8E4M3)
    throw Error(std::string("internal: an FP8 KV cache was expected, this one is ") + dtype_name(dtype));
  return static_cast<uint8_t*>(data);
}

WeightKind weight_kind(const Weight& w) {
  switch (w.dtype) {
    case DType::kFloat32: return WeightKind::kFloat32;
    case DType::kFloat16:
    case DType::kBFloat16: return WeightKind::kHalf;
    case DType::kInt8: return w.w8a8 ? WeightKind::kW8A8 : w.int8_rows ? WeightKind::kInt8Rows : WeightKind::kInt8Columns;
    case DType::kFloat8E4M3: return WeightKind::kFp8;
    case DType::kUInt8:
      if (w.int4) return WeightKind::kInt4Groups;
      break;
    default: break;
  }
  throw Error(std::string("internal: no GEMM reads a weight held in ") + dtype_name(w.dtype));
}

}  // namespace ftx::ops
