#include "lib/ops/act.h"

#include "formats/error.h"

namespace ftx::ops {

float* Act::fp32() const {
  if (dtype != DType::kFloat32)
    throw Error(std::string("activations held in ") + dtype_name(dtype) + " where fp32 ones are needed");
  return static_cast<float*>(data);
}

bool is_act_dtype(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

}  // namespace ftx::ops
