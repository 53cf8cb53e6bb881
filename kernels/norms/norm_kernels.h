#pragma once
// Norms and epilogues room: fused residual + layernorm, bias, bias + activation (gated too).
// Conventions of every launcher (all rooms): pointers are device pointers (index arrays included:
// the backend stages them first); a launcher enqueues on `stream`, returns at once, and checks the
// launch itself (not its execution); n == 0 / rows == 0 launch nothing. Semantics are those of the
// Backend method named in the comment (lib/ops/backend.h) and of its CPU twin (lib/cpu/), which
// tests/unit/cuda_backend_test.cc compares them against (label gpu). Launchers are named
// invoke_<what>, after FasterTransformer's invokeXxx, in this code base's snake case.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/elem_kind.h"
#include "lib/model/blocks.h"

namespace ftx::cuda {

// Activations (x, y, gate, out) are held in `kind` (fp32, fp16 or bf16; all of one call alike);
// biases and norm parameters are fp32. Results are computed in fp32 and rounded to `kind` once.

// Backend::add_residual_layer_norm and layer_norm: x += y + bias (each may be null); then, when
// gamma is set, out = LN(x) (out may equal x). x may be a const input when y and bias are both null
// (it is not written then).
void invoke_add_residual_layer_norm(cudaStream_t stream, ElemKind kind, void* x, const void* y, const float* bias,
                                    const float* gamma, const float* beta, void* out, int64_t rows, int64_t H,
                                    float eps);
// Backend::add_residual_rms_norm and rms_norm: as invoke_add_residual_layer_norm with RMSNorm
// (out = x · rsqrt(mean(x²) + eps) · gamma).
void invoke_add_residual_rms_norm(cudaStream_t stream, ElemKind kind, void* x, const void* y, const float* bias,
                                  const float* gamma, void* out, int64_t rows, int64_t H, float eps);
// Backend::add_bias: x[rows, N] += bias[N].
void invoke_add_bias(cudaStream_t stream, ElemKind kind, void* x, const float* bias, int64_t rows, int64_t N);
// Backend::bias_activation: x = f(x + bias), times (gate + gate_bias) when gate is set (a gated
// Activation; the caller passes its nonlinearity).
void invoke_add_bias_activation(cudaStream_t stream, ElemKind kind, void* x, const float* bias, const void* gate,
                                const float* gate_bias, int64_t rows, int64_t N, Nonlinearity f);

}  // namespace ftx::cuda
