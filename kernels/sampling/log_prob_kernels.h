#pragma once
// Prompt scoring on the device: Backend::token_log_probs (lib/ops/backend.h), one block per row of
// logits where the lm_head left them, so only one float per row crosses to the host.
// host_token_log_probs (lib/ops/backend.h) is the twin the op suite compares against.
// Launcher conventions: kernels/norms/norm_kernels.h.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ftx::cuda {

// out[r] := log_softmax(logits[r, 0:vocab])[targets[r]] for r < rows (logits [rows, stride], device;
// targets and out device); the exponentials summed in double.
void invoke_token_log_probs(cudaStream_t stream, const float* logits, int64_t rows, int64_t stride, int64_t vocab,
                            const int32_t* targets, float* out);

}  // namespace ftx::cuda
