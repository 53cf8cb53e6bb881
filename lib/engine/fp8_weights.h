#pragma once
// FP8 weights and KV-cache scales (--fp8, --fp8-kv-cache; issue 29): the layer GEMMs of a
// `ftx smoothquant --fp8` folder read from its E4M3 files with their per-tensor scales instead of
// the floating-point matrices beside them, and each layer's FP8 KV-cache scale (file names in
// lib/model/fp8_files.h, how they are made in lib/quant/fp8_export.h). Each TP rank reads its own rank's
// weight files; the scales are per tensor, the same file for every rank.
#include <cstdint>
#include <string>

#include "lib/ops/backend.h"

namespace ftx {

// Whether an FT weight name ("model.layers.L.<gemm>.weight") is an FP8 GEMM: the same GEMMs as
// is_w8a8_gemm (the four and a gated FFN's gate projection); sets `gemm` to its "model.layers.L.<gemm>" part.
bool is_fp8_gemm(const std::string& weight_name, std::string* gemm);

// The GEMM `gemm` of TP rank `rank`, [rows, cols] as this rank holds it, uploaded as an FP8 weight.
// Error naming the file: missing ("write the folder with `ftx smoothquant --fp8`"), of the wrong
// size, holding a NaN code (0x7f, 0xff: no FP8 weight has one), or a scale that is not a finite
// positive number.
ops::Weight load_fp8_weight(const std::string& dir, const std::string& gemm, int rank, int64_t rows, int64_t cols,
                            ops::Backend& backend);

// Model layer `layer`'s kv_cache_scaling_factor; errors as read_scale_file (kv_cache_scales.h).
float read_fp8_kv_scale(const std::string& dir, int64_t layer);

}  // namespace ftx
