#pragma once
// GPTQ checkpoints (quantization_config.quant_method "gptq": AutoGPTQ, GPTQModel, transformers'
// GPTQConfig), 4-bit, as their packers store each quantised Linear (GPTQModel's
// PackableQuantLinear.pack_original; AutoGPTQ's QuantLinear.pack):
//   <module>.qweight  int32 [ceil(in/8), out]   eight 4-bit values along the input dim, row k in
//                                               bits 4·(k%8) of word k/8 (low bits first)
//   <module>.qzeros   int32 [groups, ceil(out/8)] zero points, column n in bits 4·(n%8) of word n/8
//   <module>.scales   fp16  [groups, out]
//   <module>.g_idx    int32 [in]                each input row's group (act-order: any order)
//   W[k][n] = (q[k][n] - z[g_idx[k]][n]) · s[g_idx[k]][n]   (GPTQModel's dequantize_weight)
// checkpoint_format "gptq" (v1, the default) stores z - 1 (AutoGPTQ's `zeros -= 1` before packing;
// its loaders add 1 to each 4-bit field), "gptq_v2" stores z.
#include <memory>
#include <string>

#include "lib/convert/quantized/quantized_linear.h"

namespace ftx::hf {

// Error naming the quantization_config key and value ftx does not implement.
std::unique_ptr<QuantizedLinearReader> make_gptq_reader(const nlohmann::json& qc, const std::string& origin);

}  // namespace ftx::hf
