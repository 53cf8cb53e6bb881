#pragma once
// The pre-quantised INT8 weight-only layer GEMMs of a folder whose config.ini says
// weight_only_precision = int8 (lib/model/int8_files.h; an imported compressed-tensors W8A16
// checkpoint): read as stored and handed to the backend as weight-only INT8 weights, the GEMM
// arithmetic of --int8-mode 1 with the producer's values and scales.
#include <string>

#include "lib/engine/quant_policy.h"
#include "lib/model/model_config.h"
#include "lib/ops/backend.h"
#include "lib/ops/int8_columns.h"

namespace ftx {

// Error naming config.ini when an INT8 folder (cfg.holds_int8()) is asked for another quantisation of
// its layer GEMMs (--int8-mode 2, --fp8, --weight-only-precision int4); --int8-mode 1 is the folder's
// own arithmetic and is accepted. Nothing for other folders.
void check_int8_folder_policy(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant);

// Whether FT weight `weight_name` is read from the folder's INT8 files (cfg.holds_int8() and a
// layer GEMM: QKV, attention output, FFN in, gate and out); sets `gemm` to its
// "model.layers.L.<gemm>" part. Errors as check_int8_folder_policy.
bool is_int8_file_gemm(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant,
                       const std::string& weight_name, std::string* gemm);

// The two INT8 files of `gemm` on `rank` in `dir` as this rank's [rows, cols] matrix (rows, cols: the
// float weight's shape on this rank), checked: Error naming the file when missing or mis-sized.
ops::Int8Columns read_int8_files(const std::string& dir, const std::string& gemm, int rank, int64_t rows,
                                 int64_t cols);

// `m` into backend memory as a weight-only INT8 weight (dtype kInt8, one scale per column, A rounded
// to the backend's weight_dtype()), through the backend's alloc and upload: the row-major layout
// every backend's int8 GEMM reads (panel_cols 0; the CPU's column panels are a repacking that
// upload_weight_int8 makes of its own quantisation only).
ops::Weight upload_int8_columns(ops::Backend& backend, const ops::Int8Columns& m);

}  // namespace ftx
