#pragma once
// The names of the FP8 files `ftx smoothquant --fp8` writes into an FT folder (lib/quant/fp8_export.h
// makes them) and the engine reads with --fp8 / --fp8-kv-cache: part of the folder's layout, like
// ft_weight_layout.h's INT8 side files, so the engine finds them without knowing how they are made.
//
// For one layer GEMM (`gemm` = "model.layers.L.<FT GEMM name>", e.g.
// model.layers.0.attention.query_key_value), without the rank suffix and ".bin" (FtWeightFile names):
//   <gemm>.weight.fp8                 E4M3 [in, out], split per rank like the weight (suffix .R)
//   <gemm>.weights_scaling_factor     fp32 [1], once
//   <gemm>.activation_scaling_factor  fp32 [1], once
// and per layer model.layers.L.attention.kv_cache_scaling_factor, fp32 [1], once. TensorRT-LLM's
// names for the three per-tensor scales (its FP8 GPT checkpoints: attention.qkv, attention.dense,
// mlp.fc, mlp.proj .activation_scaling_factor / .weights_scaling_factor, attention.
// kv_cache_scaling_factor), on FT's GEMM names as its INT8 files are.
#include <cstdint>
#include <string>

namespace ftx {

std::string fp8_weight_name(const std::string& gemm);
std::string fp8_weight_scale_name(const std::string& gemm);
std::string fp8_act_scale_name(const std::string& gemm);
std::string fp8_kv_scale_name(int64_t layer);
// True for any of the file names above (with ".bin" and rank suffixes).
bool is_fp8_side_file(const std::string& file_name);

}  // namespace ftx
