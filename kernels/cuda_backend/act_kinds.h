#pragma once
// A dtype as the launchers see it (kernels/common/elem_kind.h), and the refusals the CUDA backend's
// ops share: an activation of a type with no kernels, or activations of two types in one call, are
// refused in one line naming the op.
#include <initializer_list>

#include "formats/dtype.h"
#include "kernels/common/elem_kind.h"
#include "lib/ops/act.h"

namespace ftx::cuda {

// fp32, fp16 or bf16; Error naming the dtype for any other (the KV cache's int8 and FP8 kinds are
// chosen by the attention launch itself).
ElemKind elem_kind(DType t);

// An activation's kind, refused with the op's name when it is not a float type activations are held in.
ElemKind act_kind(const ops::Act& a, const char* op);

// The kind all of an op's activations share (null ones aside): one type per call, Error otherwise.
ElemKind same_act_kind(std::initializer_list<ops::Act> acts, const char* op);

}  // namespace ftx::cuda
