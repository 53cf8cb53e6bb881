#pragma once
// llm-compressor's checkpoints (config.json quantization_config.quant_method "compressed-tensors")
// as INT4 matrices: weight-only int4, format "pack-quantized", group, channel or tensor strategy,
// symmetric or with zero points, with or without act-order (weight_g_idx); and as INT8 weight-only
// matrices (ops::Int8Columns): weight-only int8 (W8A16), "pack-quantized" with 8-bit fields (as
// llm-compressor writes it), channel or tensor strategy, symmetric.
//
// The stored form, per quantised Linear `m` (torch's [out, in] orientation):
//  * m.weight_packed int32 [out, ceil(in / 8)]: input column k of output row o is the 4-bit field
//    at bits 4·(k % 8) of word k / 8 (the first column in the lowest bits), holding q + 8 for the
//    signed value q in -8..7;
//  * m.weight_scale [out, groups] in the model's float type (groups: in / group_size; 1 for channel);
//    a single value for tensor;
//  * m.weight_zero_point int32 [ceil(out / 8), groups] when asymmetric (group, channel): packed
//    the same way along the output dimension, zp + 8 for the signed zero point zp in -8..7;
//  * m.weight_shape [2] = {out, in}; m.weight_g_idx [in] (act-order "group": each input column's
//    group; -1 everywhere means none).
// The weight is (q - zp) · s, which is (u - z) · s of ops::Int4Matrix with u = q + 8 and z = zp + 8
// (8 when symmetric): the nibbles are moved, transposed to FT's [in, out], never re-quantised.
//
// 8-bit: the same words with four 8-bit fields, input column k at bits 8·(k % 4) of word k / 4,
// holding q + 128; weight_scale [out, 1] (one value for tensor). The weight is q · s, FT's weight-only
// INT8 (one scale per output column): the bytes are moved and transposed, never re-quantised.
//
// Everything else compressed-tensors can express is refused at construction, naming the key and its
// value: int8 groups or zero points (ftx's INT8 GEMM has one scale per column and no zero point), FP8
// (float-quantized: dynamic per-token activations, per-channel weight scales, weight-only FP8, and
// static per-tensor FP8, whose separate q/k/v weight scales ftx's one-scale fused QKV cannot hold),
// int-quantized/naive-quantized, activation or KV-cache quantisation, sparsity, transforms, dynamic or
// block scales, ...
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/convert/quantized/quantized_linear.h"

namespace ftx::hf {

// The reader for quantization_config `qc` (quant_method "compressed-tensors"); origin: config.json's
// path, for messages. Error naming the key and value of the first option ftx does not implement.
// Module names given to the reader are matched against the config's `ignore` and name/"re:" targets
// as compressed-tensors does (a regex from the name's start); a module is quantised when its
// `weight_packed` is stored.
std::unique_ptr<QuantizedLinearReader> compressed_tensors_reader(const nlohmann::json& qc, const std::string& origin);

}  // namespace ftx::hf
