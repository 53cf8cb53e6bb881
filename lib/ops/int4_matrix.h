#pragma once
// INT4 weight-only matrices on the host: the one form every 4-bit source reduces to (quantised at
// load from a float folder, read from an FT folder's int4 files, or imported from GPTQ, AWQ and
// compressed-tensors checkpoints), before a backend takes it (Backend::upload_weight_int4).
//
// A [K, N] GEMM operand (y = x · W, FT's [in, out] orientation) stands for
//
//     W[k][n] = (u[k][n] - z[g(k)][n]) · s[g(k)][n]
//
//  * u: unsigned 4-bit values 0..15, two per byte along n: element (k, n) is byte k·N/2 + n/2, the
//    low nibble for even n, the high nibble for odd n. N is even.
//  * g(k): the group of input row k: k / group_size, or group_index[k] when there is one (GPTQ's
//    act-order g_idx: groups need not be contiguous runs of rows, and a tensor-parallel slice of
//    the rows may touch any group).
//  * s: fp32 scales [groups, N]. z: integer zero points [groups, N], one byte each (0..255; 4-bit
//    sources give 0..15, GPTQ's v1 offset can give 16); no zeros means symmetric, z = 8 (u - 8 is
//    the signed value -8..7 of TensorRT-LLM's and compressed-tensors' symmetric int4).
//
// A GEMM on it computes C = A' · W in fp32 with A' = A rounded to the model's float type (as the
// weight-only INT8 GEMM does, ops::Weight::input_dtype); each (u - z) is exact in fp32, and the sums'
// order is each backend's own but the same for any number of rows (tests hold every backend to a
// float64 emulation of the dequantised matrix, dequantize_int4 below).
#include <cstdint>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace ftx::ops {

struct Int4Matrix {
  int64_t rows = 0, cols = 0;  // K, N
  int64_t group_size = 0;      // rows per group when group_index is empty (K: one group, per column)
  int64_t groups = 0;          // rows of scales and zeros
  std::vector<uint8_t> packed;        // rows · cols/2 bytes
  std::vector<float> scales;          // groups · cols
  std::vector<uint8_t> zeros;         // groups · cols, or empty: symmetric (z = 8)
  std::vector<int32_t> group_index;   // rows entries in [0, groups), or empty: k / group_size

  bool symmetric() const { return zeros.empty(); }
  int64_t group_of(int64_t k) const { return group_index.empty() ? k / group_size : group_index[k]; }
  uint8_t nibble(int64_t k, int64_t n) const {
    const uint8_t b = packed[static_cast<size_t>(k * (cols / 2) + n / 2)];
    return (n & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0xF);
  }
  int zero(int64_t g, int64_t n) const { return zeros.empty() ? 8 : zeros[static_cast<size_t>(g * cols + n)]; }
  float scale(int64_t g, int64_t n) const { return scales[static_cast<size_t>(g * cols + n)]; }
  // W[k][n], (u - z) · s as one fp32 product (exact in double: see dequantize_int4).
  float value(int64_t k, int64_t n) const {
    const int64_t g = group_of(k);
    return static_cast<float>(nibble(k, n) - zero(g, n)) * scale(g, n);
  }
};

// Throws Error naming `origin` unless the sizes agree, cols is even, group_size divides nothing it
// must not (with no group_index: groups == ceil(rows / group_size)), every group_index entry lies in
// [0, groups) and every scale is finite.
void check_int4(const Int4Matrix& m, const std::string& origin);

// Round to nearest, as TensorRT-LLM's weight-only quantiser does, group by group along K (group_size
// rows; 0 or >= rows: one group, per column) of a [rows, cols] host matrix in `src_dtype` (fp32,
// fp16, bf16):
//  * symmetric (TensorRT-LLM's int4 rule, FT's int8 rule at 4 bits): s = max|w| / 8 (1 when the
//    group's column is all zero), q = clamp(round(w / s), -8, 7) (half away from zero), u = q + 8;
//  * zero_points (GPTQ's and AWQ's asymmetric RTN): lo = min(min w, 0), hi = max(max w, 0),
//    s = (hi - lo) / 15 (1 when 0), z = clamp(round(-lo / s), 0, 15), u = clamp(round(w / s) + z, 0, 15).
Int4Matrix quantize_int4(const void* src, DType src_dtype, int64_t rows, int64_t cols, int64_t group_size,
                         bool zero_points);

// The matrix as doubles [rows, cols]: (u - z) · s with s widened exactly, the float64 reference the
// tests hold every GEMM to.
std::vector<double> dequantize_int4(const Int4Matrix& m);

// Tensor-parallel pieces of an INT4 matrix, as the float matrix would be split:
//  * columns [c0, c0 + nc) (a column-parallel GEMM: QKV, FFN in/gate): u, s and z columns; nc and c0
//    even (Error naming `origin` otherwise);
//  * rows [r0, r0 + nr) (a row-parallel GEMM: attention output, FFN out): u rows; with no
//    group_index, r0 and nr must be multiples of group_size (Error naming `origin` and the group
//    size: a group would straddle two ranks) and the groups' s and z rows are sliced, except for a
//    single group (per channel), whose s and z every slice keeps; with a group_index, every group's
//    s and z are kept and group_index is sliced.
Int4Matrix int4_columns(const Int4Matrix& m, int64_t c0, int64_t nc, const std::string& origin);
Int4Matrix int4_rows(const Int4Matrix& m, int64_t r0, int64_t nr, const std::string& origin);
// Side by side along N (QKV or gate|up fused from separate projections): same rows and grouping
// (group_size, groups and group_index equal; Error naming `origin` otherwise); when some parts have
// zero points, a symmetric part's are 8.
Int4Matrix int4_concat_columns(const std::vector<const Int4Matrix*>& parts, const std::string& origin);

}  // namespace ftx::ops
