#pragma once
// Fills tuning buffers with small pseudo-random values, so timings are not taken on all-zero data
// (which some GPUs run measurably faster through lower switching power).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_tune/gemm_tuner.h"

namespace ftx::cuda {

// `count` elements of `dtype` (fp32_elements: FP32 regardless of dtype) at `data`, values in [-1, 1).
void fill_random(void* data, size_t count, TuneDType dtype, bool fp32_elements, uint32_t seed, cudaStream_t stream);

}  // namespace ftx::cuda
