#pragma once
// AWQ checkpoints (quantization_config.quant_method "awq": AutoAWQ, transformers' AwqConfig), the
// GEMM version, as AutoAWQ's WQLinear_GEMM.from_linear stores each quantised Linear:
//   <module>.qweight  int32 [in, out/8]       eight 4-bit values along the output dim per word, in
//                                             AWQ's interleaved order: word c's bits 4·i hold
//                                             column 8c + (0, 2, 4, 6, 1, 3, 5, 7)[i]
//   <module>.qzeros   int32 [in/group, out/8] zero points, the same order
//   <module>.scales   fp16  [in/group, out]
//   W[k][n] = (q[k][n] - z[k/group][n]) · s[k/group][n]   (AutoAWQ's dequantize_gemm; no offset)
#include <memory>
#include <string>

#include "lib/convert/quantized/quantized_linear.h"

namespace ftx::hf {

// Error naming the quantization_config key and value ftx does not implement (gemv, marlin, ...).
std::unique_ptr<QuantizedLinearReader> make_awq_reader(const nlohmann::json& qc, const std::string& origin);

}  // namespace ftx::hf
