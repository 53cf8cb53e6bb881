#pragma once
// The FFN activations on the CPU, one row at a time. The inner loops avoid libm calls (tanhf,
// expf) so the compiler vectorises them: libm's scalar tanhf was 6.6% of a GPT-2 decode step.
#include <cstdint>

#include "lib/model/blocks.h"

namespace ftx::cpu {

// x[i] = act(x[i] + bias[i]); gated kinds (gate != null): x[i] = act(x[i] + bias[i]) · (gate[i] +
// gate_bias[i]). Biases may be null.
void activate_row(float* x, const float* bias, const float* gate, const float* gate_bias, int64_t n,
                  Activation act);

// simd_math.h's exp_approx, compiled here, for its unit test.
float exp_vectorizable(float z);

}  // namespace ftx::cpu
