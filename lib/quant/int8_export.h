#pragma once
// TensorRT-LLM's SmoothQuant / INT8 KV-cache files (TensorRT-LLM
// examples/gpt/utils/convert.py `generate_int8` + `write_int8`), computed from the full smoothed
// weights as they are stored (rounded to the output dtype) and the full-tensor ranges, then split
// per TP rank as write_int8 splits them:
//  * weight.int8.R / weight.int8.col.R: round-half-even(W · 127/max|W|) clipped to ±127, per tensor
//    (QKV: one scale each for Q, K and V) or per output column; split like the weight;
//  * scale_w_quant_orig.col / scale_y_accum_quant.col: per rank for column-parallel GEMMs (QKV,
//    FC1), once for row-parallel ones (attention.dense, FC2);
//  * once (fp32): scale_x_orig_quant = 127/max|x|, scale_w_quant_orig (QKV: [3, H], Q/K/V each
//    broadcast), scale_y_accum_quant = s_y/(s_x·s_w), scale_y_quant_orig = max|y|/127.
// kv_only (--calibrate-kv-cache without --alpha): only QKV's scale_y_quant_orig.
// Scales are computed in float64 and stored as fp32.
#include <map>
#include <string>
#include <vector>

#include "lib/convert/conversion.h"
#include "lib/quant/host_model.h"
#include "lib/quant/smoothing.h"

namespace ftx::quant {

// FasterTransformer's OPT W8A8 files (FT examples/pytorch/gpt/utils/huggingface_opt_convert.py
// `quantize`): per-tensor scales from the ranges' maxima and the
// stored weight's max |W| (clipped at 1e-8; QKV: one per Q, K, V):
//  * weight.int8.R: round-half-even(W · 127/max|W|), split like the weight;
//  * scale = 127/max|x| (QKV: 3 equal values), scale_inter = (127/max|y|)/(scale·127/max|W|)
//    (QKV: [3, H/T], each of Q/K/V's value repeated; the same on every rank, so written once),
//    scale_out = max|y|/127 (QKV: 3 values), once each, without a rank suffix.
// FT's converter writes the scales in weight_data_type, but FT's runtime reads them as fp32: they
// are written as fp32 here.
std::vector<SideTensor> ft_int8_files(const HostModel& model, const std::map<std::string, QuantRange>& ranges,
                                      int64_t tp, DType storage);

std::vector<SideTensor> trtllm_int8_files(const HostModel& model, const std::map<std::string, QuantRange>& ranges,
                                          int64_t tp, DType storage, bool kv_only);

}  // namespace ftx::quant
