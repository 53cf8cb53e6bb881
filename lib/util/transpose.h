#pragma once
// Out-of-place transpose of a row-major R x C matrix of 2- or 4-byte elements (fp16/bf16/fp32
// bytes; the values are never interpreted). Converters transpose most of a checkpoint's bytes
// (nn.Linear [out, in] -> FT [in, out]), so this runs at memory speed rather than element speed.
#include <cstddef>
#include <cstdint>

namespace ftx {

// dst[c * R + r] = src[r * C + c]. Throws Error for another element size.
void transpose_matrix(const uint8_t* src, int64_t R, int64_t C, size_t elem_size, uint8_t* dst);

// The same for an R x C block inside larger row-major matrices: dst[c * dst_stride + r] =
// src[r * src_stride + c], strides in elements. Lets a caller transpose runs of rows into their
// places in one output (a reordering fused with the transpose).
void transpose_block(const uint8_t* src, int64_t R, int64_t C, int64_t src_stride, size_t elem_size, uint8_t* dst,
                     int64_t dst_stride);

}  // namespace ftx
