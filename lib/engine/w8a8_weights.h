#pragma once
// SmoothQuant W8A8 weights (--int8-mode 2): the layer GEMMs of a `ftx smoothquant` folder read from
// its int8 files instead of the smoothed floating-point matrices beside them, with the scales each
// runtime mode needs (docs/ft-layout.md#quantization-side-files). TensorRT-LLM's files (its weight.py):
// per-tensor activations take scale_x_orig_quant, scale_y_accum_quant[.col] and scale_y_quant_orig;
// per-token ones scale_w_quant_orig[.col]; per-channel picks the `.col` weights and scales.
// FasterTransformer's OPT files (per-tensor only): scale, scale_inter and
// scale_out in those three roles. Each TP rank reads its own rank's weight files.
#include <cstdint>
#include <string>

#include "lib/engine/quant_policy.h"
#include "lib/model/model_config.h"
#include "lib/ops/backend.h"

namespace ftx {

// Whose int8 files a folder holds (config.ini int8_format; TensorRT-LLM's when absent).
enum class W8A8Files { kTrtLlm, kFt };

// The folder can serve W8A8 in `mode`: config.ini says smoothquant exported it with an alpha, and
// FT-format files (multi-head attention only) are asked for per tensor only.
// Returns the files' format; throws Error naming the folder and the reason otherwise.
W8A8Files check_w8a8_folder(const std::string& dir, const ModelConfig& cfg, const SmoothQuant& mode);

// The GEMM "model.layers.L.<gemm>" (gemm: attention.query_key_value, attention.dense,
// mlp.dense_h_to_4h, mlp.dense_h_to_4h.gate or mlp.dense_4h_to_h) of TP rank `rank` of `tp`,
// [rows, cols] as this rank holds it, uploaded as a W8A8 weight; `cfg` says how QKV's per-tensor
// scales (one per Q, K, V) map to this rank's columns. Throws Error naming a missing or mis-sized file.
ops::Weight load_w8a8_weight(const std::string& dir, const ModelConfig& cfg, const std::string& gemm, int rank, int tp,
                             int64_t rows, int64_t cols, const SmoothQuant& mode, W8A8Files files,
                             ops::Backend& backend);

// Whether an FT weight name ("model.layers.L.<gemm>.weight") is a W8A8 GEMM: the four of every
// layer and a gated FFN's gate projection; sets `gemm` to its "model.layers.L.<gemm>" part.
bool is_w8a8_gemm(const std::string& weight_name, std::string* gemm);

}  // namespace ftx
