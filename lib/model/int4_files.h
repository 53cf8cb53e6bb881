#pragma once
// The INT4 weight-only files of an FT folder (docs/quantization.md): what the importers of GPTQ, AWQ
// and compressed-tensors checkpoints write and the engine reads, part of the folder's layout like
// fp8_files.h, so the engine finds them without knowing who made them.
//
// For one layer GEMM (`gemm` = "model.layers.L.<FT GEMM name>", e.g.
// model.layers.0.attention.query_key_value) on rank R, instead of <gemm>.weight.R.bin,
// each split per rank as ops::int4_columns / int4_rows split the matrix (lib/ops/int4_matrix.h; the
// engine reads them with read_int4_files, lib/engine/int4_weights.h):
//   <gemm>.weight.int4.R.bin          uint8 [in_R, out_R / 2]  the 4-bit values u, two per byte
//   <gemm>.weight.int4_scales.R.bin   fp32  [groups_R, out_R]  the group scales s
//   <gemm>.weight.int4_zeros.R.bin    uint8 [groups_R, out_R]  zero points z (absent: symmetric, 8)
//   <gemm>.weight.int4_g_idx.R.bin    int32 [in_R]             each row's group (absent: row / group size)
// config.ini's keys weight_only_precision = int4 and int4_group_size (lib/model/model_config.h)
// say the folder holds them.
#include <string>

namespace ftx {

std::string int4_values_name(const std::string& gemm);  // <gemm>.weight.int4
std::string int4_scales_name(const std::string& gemm);
std::string int4_zeros_name(const std::string& gemm);
std::string int4_g_idx_name(const std::string& gemm);
// True for any of the file names above (with ".bin" and rank suffixes).
bool is_int4_side_file(const std::string& file_name);

}  // namespace ftx
