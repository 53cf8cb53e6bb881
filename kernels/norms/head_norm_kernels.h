#pragma once
// Per-head norms and caps room: QK-norm over the Q and K heads of fused QKV rows, and the logits'
// softcap. Conventions as every room's (kernels/norms/norm_kernels.h): device pointers, enqueued on
// `stream`, the launch checked, nothing launched for empty shapes; semantics those of the Backend
// method named (lib/ops/backend.h) and of its CPU twin (lib/cpu/), which the op suite compares them
// against (tests/unit/backend_ops/, label gpu).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/elem_kind.h"

namespace ftx::cuda {

// Backend::head_rms_norm: in each of `rows` rows of qkv (held in `kind`: fp32, fp16 or bf16; row
// stride `stride` elements), the q_heads Q heads then kv_heads K heads of head_dim values each
// become x · rsqrt(mean(x²) + eps) · gamma (gamma_q, gamma_k: fp32 [head_dim]), in place, the mean
// of squares summed in double as lib/cpu/cpu_rms_norm.cc, each result rounded to `kind` once.
void invoke_head_rms_norm(cudaStream_t stream, ElemKind kind, void* qkv, int64_t rows, int64_t stride,
                          int64_t q_heads, int64_t kv_heads, int64_t head_dim, const float* gamma_q,
                          const float* gamma_k, float eps);
// Backend::softcap: x[rows·N] (fp32) = cap · tanh(x / cap), in place.
void invoke_softcap(cudaStream_t stream, float* x, int64_t rows, int64_t N, float cap);

}  // namespace ftx::cuda
