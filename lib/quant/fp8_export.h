#pragma once
// TensorRT-LLM's FP8 quantisation of an FT folder (`ftx smoothquant --fp8`; issue 29), from the full
// weights as they are stored (rounded to the output dtype) and the full-tensor calibration ranges,
// then split per TP rank as the INT8 files are (names in lib/model/fp8_files.h). For each layer GEMM
// (QKV, attention.dense, FC1, FC2, and a gated FFN's gate projection, which reads FC1's input):
//  * weights_scaling_factor s_w = max |W| / 448 over the whole tensor (QKV: Q, K and V together, as
//    TensorRT-LLM takes the largest of their three scales), fp32;
//  * activation_scaling_factor s_x = max |x| / 448 over the calibration data (the gate: FC1's);
//  * weight.fp8.R: E4M3(W / s_w), the quotient in fp32, rounded to nearest even (formats/fp8_e4m3.h),
//    split like the weight (QKV per Q/K/V segment: grouped-query K/V heads split, multi-query's one
//    K/V head whole on every rank; lib/model/qkv_columns.h);
// and per layer kv_cache_scaling_factor = max(max |K|, max |V|) / 448 over the calibration tokens,
// K after rotary (the values the cache holds). Every amax is floored at 1e-8 (fp8_scale_of).
#include <map>
#include <string>
#include <vector>

#include "lib/convert/conversion.h"
#include "lib/quant/act_ranges.h"
#include "lib/quant/host_model.h"
#include "lib/quant/smoothing.h"

namespace ftx::quant {

// Error naming `origin` when `kv` lacks a layer of `model` (a ranges file from before FP8 existed).
std::vector<SideTensor> trtllm_fp8_files(const HostModel& model, const std::map<std::string, QuantRange>& ranges,
                                         const std::map<std::string, KvRange>& kv, int64_t tp, DType storage,
                                         const std::string& origin);

}  // namespace ftx::quant
