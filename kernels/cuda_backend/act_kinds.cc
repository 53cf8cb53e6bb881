#include "kernels/cuda_backend/act_kinds.h"

#include <string>

#include "formats/error.h"

namespace ftx::cuda {

ElemKind elem_kind(DType t) {
  switch (t) {
    case DType::kFloat32: return ElemKind::kFp32;
    case DType::kFloat16: return ElemKind::kFp16;
    case DType::kBFloat16: return ElemKind::kBf16;
    default: throw Error(std::string("CUDA backend: no kernels for ") + dtype_name(t) + " data");
  }
}

ElemKind act_kind(const ops::Act& a, const char* op) {
  if (!ops::is_act_dtype(a.dtype))
    throw Error(std::string("CUDA ") + op + ": activations held in " + dtype_name(a.dtype) + " (fp32, fp16 or bf16)");
  return elem_kind(a.dtype);
}

ElemKind same_act_kind(std::initializer_list<ops::Act> acts, const char* op) {
  const ops::Act* first = nullptr;
  for (const ops::Act& a : acts) {
    if (!a) continue;
    if (first && a.dtype != first->dtype)
      throw Error(std::string("CUDA ") + op + ": activations in " + dtype_name(first->dtype) + " and " +
                  dtype_name(a.dtype) + " in one call");
    if (!first) first = &a;
  }
  return first ? act_kind(*first, op) : ElemKind::kFp32;
}
}  // namespace ftx::cuda
