#pragma once
// Attention room: rotary position embedding of the Q and K heads of fused QKV rows.
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

namespace ftx::cuda {

// Backend::rotary. interleaved: GPT-J pairs (2i, 2i+1); else NeoX pairs (i, i + rot_dim/2).
// qkv is held in `kind` (fp32, fp16 or bf16); inv_freq (device) holds rot_dim/2 frequencies
// (RotaryFrequencies::inv_freq, computed on the host); cos and sin are scaled by `magnitude`
// (RotaryFrequencies::magnitude).
void invoke_rotary(cudaStream_t stream, ElemKind kind, void* qkv, int64_t rows, int64_t stride,
                   const int32_t* positions, int64_t heads, int64_t head_dim, int64_t rot_dim, bool interleaved,
                   const double* inv_freq, double magnitude);

}  // namespace ftx::cuda
