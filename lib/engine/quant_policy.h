#pragma once
// QuantPolicy: how a run quantises its model, as one value: which weight matrices are held in int8
// or FP8 and what the KV cache is held in (--int8-mode, --per-token, --per-channel, --int8-lm-head,
// --fp8, --int8-kv-cache, --fp8-kv-cache). make_runtime checks the flags and makes it;
// ModelWeights::load reads it to choose each file's upload and the KV cache's scales. The backend
// holds no mode: it is asked for the upload each weight needs, and a GEMM follows the weight it is
// given (ops::weight_kind).
#include <cstdint>

#include "formats/dtype.h"

namespace ftx {

// SmoothQuant W8A8 (FT's int8_mode 2, TensorRT-LLM's --use_smooth_quant): the layers' GEMM matrices
// are the smoothquant folder's int8 files, and each GEMM quantises its input (the W8A8 arithmetic of
// lib/ops/op_types.h). per_token: dynamic per-row activation scales (--per-token); per_channel: the
// per-column weight files and scales (--per-channel).
struct SmoothQuant {
  bool on = false, per_token = false, per_channel = false;
};

struct QuantPolicy {
  // Weight-only INT8 (FT's int8_mode 1): the layers' GEMM matrices (QKV, attention output, FFN in
  // and out; not the embeddings or lm_head) quantised per column at load time
  // (Backend::upload_weight_int8); the GEMMs read int8, with A in the model's float type. A folder
  // whose config.ini says weight_only_precision = int8 (an imported compressed-tensors W8A16
  // checkpoint) holds them pre-quantised: ModelWeights::load reads its files (int8_weights.h) whether
  // or not this is set.
  bool int8_weight_only = false;
  // --int8-lm-head (with weight-only INT8): the lm_head table [vocab, H] held in int8 too, each row
  // (one output of the transposed GEMM) quantised by the same rule, as TensorRT-LLM's
  // --quantize_lm_head and llama.cpp's q8_0 output tensor do. FT keeps it floating point, and so
  // does ftx without the flag: at GPT-2's size the fp32 table is two thirds of what a weight-only
  // INT8 step reads. A backend without an int8 transposed GEMM says so (int8_lm_head_supported).
  bool int8_lm_head = false;
  // INT4 weight-only (--weight-only-precision int4, TensorRT-LLM's --weight_only_precision int4): the
  // same GEMM matrices quantised at load, group by group along the input dimension
  // (ops::quantize_int4: group_size rows, 0 per column; zero_points for the asymmetric rule), held in
  // 4 bits (Backend::upload_weight_int4). A folder whose config.ini says weight_only_precision = int4
  // (an imported GPTQ, AWQ or compressed-tensors checkpoint) holds them already: ModelWeights::load
  // reads its files whether or not this is set.
  struct Int4 {
    bool on = false;
    int64_t group_size = 128;
    bool zero_points = false;
  } int4;
  SmoothQuant smoothquant;
  // FP8 (TensorRT-LLM's FP8 quantisation, --fp8): the layers' GEMM matrices (QKV, attention output,
  // FFN in, gate and out) are the folder's E4M3 files with their per-tensor scales, and each GEMM
  // quantises its input to E4M3 (the FP8 arithmetic of lib/ops/op_types.h).
  bool fp8 = false;
  // INT8 KV cache (TensorRT-LLM's --int8_kv_cache): K and V held in int8, each layer's with its own
  // calibrated scale (KvCache::scale, read by the weight loader from the folder's scale files).
  bool int8_kv_cache = false;
  // FP8 KV cache (TensorRT-LLM's FP8 KV CACHE, --fp8-kv-cache): K and V held in E4M3, each layer's
  // with its kv_cache_scaling_factor. Not with the INT8 cache (make_runtime refuses both).
  bool fp8_kv_cache = false;

  // The KV cache's dtype on a backend whose unquantised cache is `unquantized` (Backend::kv_dtype()).
  DType kv_dtype(DType unquantized) const {
    return int8_kv_cache ? DType::kInt8 : fp8_kv_cache ? DType::kFloat8E4M3 : unquantized;
  }
};

}  // namespace ftx
