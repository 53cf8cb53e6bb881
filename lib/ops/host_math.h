#pragma once
// Host arithmetic the backends and the weight loader share: weight dtype conversion, FT's int8
// weight quantisation, ALiBi slopes, and the memory the host can still give.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "formats/dtype.h"

namespace ftx::ops {

// The dtypes weights are read from and held in: fp32, fp16, bf16.
bool is_weight_dtype(DType t);

// Host conversion of n weight elements from `from` to `to` (each fp32, fp16 or bf16; round to
// nearest even when narrowing). Throws Error naming an unsupported dtype.
void convert_weight(const void* src, DType from, void* dst, DType to, size_t n);

// FT's weight-only quantisation of a [rows, cols] fp32 matrix, per output column n:
// scale[n] = max_k |W[k][n]| / 128 (128, not 127: FT's cutlass preprocessor), q = round(W / scale)
// half away from zero, clamped to [-128, 127]; an all-zero column gets scale 1 (its q are 0).
void quantize_int8_columns(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scale);

// ALiBi slopes for all `num_heads` heads (BLOOM's): n2 = largest power of two ≤ heads;
// h < n2: 2^(-8(h+1)/n2); h ≥ n2: 2^(-4(2(h-n2)+1)/n2). A TP rank uses heads [r·n/T, (r+1)·n/T).
std::vector<float> alibi_slopes(int64_t num_heads);

// The host's MemAvailable, lowered to the cgroup's memory.max headroom when one is set.
size_t host_available_memory();

}  // namespace ftx::ops
