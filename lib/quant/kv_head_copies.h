#pragma once
// `ftx smoothquant -g T` of a grouped-query model with fewer key/value heads g than ranks: each K/V
// head is copied to the T/g ranks whose query heads use it, as convert-hf writes such a folder
// (TensorRT-LLM's dup_kv_weight). The copies are exact, so calibration and
// smoothing are those of the model as read; copying after them repeats QKV's K and V columns in
// the weight, the bias and the GEMM's ranges (y and w per column), and every scale derived from
// them (maxima over Q, K or V, or per column) is what the copied model would give.
#include <cstdint>
#include <map>
#include <string>

#include "lib/quant/host_model.h"
#include "lib/quant/smoothing.h"

namespace ftx::quant {

// The key/value heads the output for `tp` ranks holds: cfg's, or tp when 1 < g < tp. Error naming
// `origin` when g does not divide tp.
int64_t kv_heads_for(const ModelConfig& cfg, int64_t tp, const std::string& origin);

// Copies as above when kv_heads_for(model.cfg, tp) differs from g, and sets model.cfg.kv_head_num
// to it. Returns g when heads were copied (config.ini's source_kv_head_num), 0 otherwise.
int64_t copy_kv_heads(HostModel& model, std::map<std::string, QuantRange>& ranges, int64_t tp);

}  // namespace ftx::quant
