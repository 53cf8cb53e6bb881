#pragma once
// The INT4 weight-only layer GEMMs at load: from the folder's INT4 files (config.ini's
// weight_only_precision = int4, lib/model/int4_files.h) or quantised from the floating-point files
// (--weight-only-precision int4, QuantPolicy::Int4), and handed to the backend in 4 bits.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/dtype.h"
#include "lib/engine/quant_policy.h"
#include "lib/model/model_config.h"
#include "lib/ops/backend.h"
#include "lib/ops/int4_matrix.h"

namespace ftx {

// Whether FT weight `weight_name` is read as INT4 under `cfg` and `quant` (a layer GEMM: QKV,
// attention output, FFN in, gate and out); sets `gemm` to its "model.layers.L.<gemm>" part. Error
// naming config.ini when an INT4 folder is asked for another quantisation of the same GEMMs.
bool is_int4_gemm(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant, const std::string& weight_name,
                  std::string* gemm);

// This rank's [rows, cols] matrix of `gemm` as an INT4 weight: the folder's INT4 files when
// cfg.holds_int4(), else `float_src` (the float file's bytes, `src_dtype`) quantised by quant.int4's
// rule. `bytes` gets what the backend holds (values, scales, zeros).
ops::Weight load_int4_weight(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant,
                             const std::string& gemm, int rank, int64_t rows, int64_t cols, const void* float_src,
                             DType src_dtype, ops::Backend& backend, size_t* bytes);

// The four INT4 files of `gemm` on `rank` in FT folder `dir` (lib/model/int4_files.h) as a [rows, cols]
// matrix (rows, cols: this rank's shape of the float weight), checked (ops::check_int4): Error naming
// the file on a missing file or a size that disagrees. group_size: the folder's int4_group_size.
ops::Int4Matrix read_int4_files(const std::string& dir, const std::string& gemm, int rank, int64_t rows, int64_t cols,
                                int64_t group_size);

// The bytes per weight an INT4 [rows, cols] GEMM matrix takes (for the memory check before loading).
double int4_bytes_per_weight(const ModelConfig& cfg, const QuantPolicy& quant, int64_t rows);

}  // namespace ftx
