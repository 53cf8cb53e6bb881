#pragma once
// Act: a run of activations in a backend's memory and the float type they are held in.
//
// The engine holds its residual stream, GEMM inputs and outputs and attention inputs in the
// backend's activation dtype (Backend::act_dtype()): fp32 on the CPU, the reference; fp16 or bf16
// on a GPU running a half model, as FasterTransformer does, so that every elementwise kernel moves
// half the bytes and a GEMM's activation operand needs no cast. Offsets are in elements
// (`x + row * H`), whatever the dtype, so the engine never branches on it. A plain float pointer
// converts implicitly (fp32), so fp32-only callers and the tests of single ops need not know about
// the dtype; a backend reads an Act through fp32() (checked) or, on a device, by its dtype.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/dtype.h"

namespace ftx::ops {

struct Act {
  void* data = nullptr;
  DType dtype = DType::kFloat32;

  Act() = default;
  Act(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): "no such input"
  Act(float* p) : data(p) {}  // NOLINT(google-explicit-constructor): fp32 is the default
  // An input the callee only reads (the const of the seam's inputs is the caller's promise).
  Act(const float* p) : data(const_cast<float*>(p)) {}  // NOLINT(google-explicit-constructor)
  Act(void* p, DType t) : data(p), dtype(t) {}

  explicit operator bool() const { return data != nullptr; }
  // `elems` elements further on (in this Act's dtype).
  Act operator+(int64_t elems) const {
    return Act(static_cast<char*>(data) + elems * static_cast<int64_t>(dtype_size(dtype)), dtype);
  }
  size_t bytes(size_t n) const { return n * dtype_size(dtype); }
  // data, checked to be fp32 (a backend whose activations are fp32 only; Error naming the dtype).
  float* fp32() const;
};

// The float types activations may be held in: fp32, fp16, bf16.
bool is_act_dtype(DType t);

}  // namespace ftx::ops
