#pragma once
// The pre-quantised INT8 weight-only files of an FT folder (docs/quantization.md): what the importer
// of compressed-tensors W8A16 checkpoints writes and the engine reads, so a folder's int8 values and
// scales are the producer's and not re-derived at load (--int8-mode 1 quantises a float folder at
// load instead). For one layer GEMM (`gemm` = "model.layers.L.<FT GEMM name>") on rank R, instead
// of <gemm>.weight.R.bin, split per rank as the float matrix is (lib/ops/int8_columns.h):
//   <gemm>.weight.int8_wo.R.bin          int8 [in_R, out_R]  the values q
//   <gemm>.weight.int8_wo_scales.R.bin   fp32 [out_R]        one scale s per output column
// standing for W = q · s. config.ini's weight_only_precision = int8 (lib/model/model_config.h) says
// the folder holds them.
#include <string>

namespace ftx {

std::string int8_values_name(const std::string& gemm);  // <gemm>.weight.int8_wo
std::string int8_scales_name(const std::string& gemm);  // <gemm>.weight.int8_wo_scales
// True for either file name above (with the rank suffix and ".bin").
bool is_int8_wo_side_file(const std::string& file_name);

}  // namespace ftx
