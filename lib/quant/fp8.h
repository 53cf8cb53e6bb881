#pragma once
// FP8 E4M3 (issue 29; TensorRT-LLM's FP8 and FP8 KV CACHE) as `ftx smoothquant --fp8` makes it:
// TensorRT-LLM's per-tensor scales and the quantisation of a weight with its scale. The element codec
// is a number format (formats/fp8_e4m3.h) and the files' names part of the folder's layout
// (lib/model/fp8_files.h); both are included here for the writers.
#include <cstddef>
#include <cstdint>

#include "formats/fp8_e4m3.h"
#include "lib/model/fp8_files.h"

namespace ftx::quant {

// TensorRT-LLM's per-tensor FP8 scale of a tensor whose largest magnitude is `amax`: amax / 448 in
// fp32 (weights_scaling_factor, activation_scaling_factor, kv_cache_scaling_factor), amax floored at
// 1e-8 (an all-zero tensor still gets a usable scale, as the INT8 export clips max |W|).
float fp8_scale_of(double amax);

// q[i] = float_to_e4m3(w[i] / scale), the quotient in fp32 (the stored weight over its stored scale).
void quantize_e4m3(const float* w, size_t n, float scale, uint8_t* q);

}  // namespace ftx::quant
