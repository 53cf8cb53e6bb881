#pragma once
// Rounding a GEMM's fp32 activations to the weights' half type (the Backend::gemm contract for
// fp16/bf16 weights), sixteen (AVX-512) or eight (AVX2) lanes at a time: F16C's vcvtps2ph for fp16 and integer round to
// nearest even for bf16, the same results as formats/dtype.h's scalar float_to_half /
// float_to_bf16 for every input (NaN stays NaN). The scalar loops were 6% of a 512-token fp16
// prefill on their own.
#include <cstddef>
#include <cstdint>

namespace ftx::cpu {

// dst[i] = half_to_float(float_to_half(src[i])).
void round_through_fp16(const float* src, size_t n, float* dst);
// dst[i] = bf16_to_float(float_to_bf16(src[i])).
void round_through_bf16(const float* src, size_t n, float* dst);
// dst[i] = float_to_bf16(src[i]).
void to_bf16(const float* src, size_t n, uint16_t* dst);

}  // namespace ftx::cpu
