#pragma once
// Pre-quantised INT8 weight-only matrices on the host (FT's int8_mode 1 with the int8 values made
// elsewhere: an imported compressed-tensors W8A16 checkpoint, read back from an FT folder's INT8
// files, lib/model/int8_files.h). A [K, N] GEMM operand (FT's [in, out] orientation) stands for
//
//     W[k][n] = q[k][n] · s[n]
//
// with q int8 (-128..127) row-major and one fp32 scale per output column: the arithmetic of
// Backend::upload_weight_int8's weights (op_types.h's Weight::scale), whose values ftx's own
// quantiser chooses instead. Splitting it for tensor parallelism moves values, never rounds them.
#include <cstdint>
#include <string>
#include <vector>


namespace ftx::ops {

struct Int8Columns {
  int64_t rows = 0, cols = 0;  // K, N
  std::vector<int8_t> values;  // rows · cols
  std::vector<float> scales;   // cols
};

// Throws Error naming `origin` unless the sizes agree and every scale is finite.
void check_int8_columns(const Int8Columns& m, const std::string& origin);
// Output columns [first, first + n) (a column-parallel rank's share).
Int8Columns int8_columns(const Int8Columns& m, int64_t first, int64_t n, const std::string& origin);
// Input rows [first, first + n), every column's scale kept (a row-parallel rank's share).
Int8Columns int8_rows(const Int8Columns& m, int64_t first, int64_t n, const std::string& origin);
// The matrices side by side (q, k and v into one QKV GEMM); all must have the same rows.
Int8Columns int8_concat_columns(const std::vector<const Int8Columns*>& parts, const std::string& origin);

}  // namespace ftx::ops
