#pragma once
// The INT8 KV cache's per-layer scales in an FT folder (--int8-kv-cache). TensorRT-LLM takes a
// layer's KV-cache scale from its QKV GEMM's calibrated
// output range: kv_quant_orig = scale_y_quant_orig = max|QKV output| / 127, one fp32 value per
// layer in `model.layers.L.attention.query_key_value.scale_y_quant_orig.bin`, written by
// `ftx smoothquant --calibrate-kv-cache` (or --alpha). The value is per tensor, so every TP rank
// reads the same file.
#include <cstdint>
#include <string>

namespace ftx {

// The file name (in the model folder) of model layer `layer`'s scale.
std::string kv_cache_scale_file(int64_t layer);

// kv_quant_orig of model layer `layer` of the folder `dir`. Error naming the file when it is
// missing ("--int8-kv-cache needs ... ftx smoothquant --calibrate-kv-cache"), is not 4 bytes, or
// holds a value that is not a finite positive number.
float read_kv_cache_scale(const std::string& dir, int64_t layer);

// One fp32 scale file (the INT8 and FP8 scales): Error naming `path` when it is missing (with
// `missing`, what needs it and how to write it), is not 4 bytes, or holds a value that is not a
// finite positive number.
float read_scale_file(const std::string& path, const std::string& missing);

}  // namespace ftx
