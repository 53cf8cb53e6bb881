#pragma once
// The HF converter's side of a quantised checkpoint (config.json's quantization_config): the reader
// for its method (make_quantized_linear_reader) gives each quantised Linear as an INT4 matrix (or,
// for 8-bit weights, an INT8 one with column scales); this maps the Linear as the family's layout
// table maps `<module>.weight` (same FT GEMM, q/k/v fused into query_key_value, the same column- or
// row-parallel split, K/V heads copied per rank as the float QKV is), and writes the INT4 files
// (lib/model/int4_files.h) or INT8 files (lib/model/int8_files.h) of each GEMM per rank as side
// tensors of the plan. Nothing of it goes through float.
#include <set>
#include <string>

#include "lib/convert/hf/family.h"

namespace ftx::hf {

// Plans the INT4 (INT8) files of every quantised Linear of `in` (whose config.json has a
// quantization_config) at plan.cfg's TP size, sets plan.cfg.weight_only_precision = kInt4 and
// int4_group_size (kInt8), and returns the tensor names (normalised) the float layout must not see.
// `family` must be llama-like with its projections stored apart (the only layout this maps); others
// are refused naming model_type. Every layer GEMM must be quantised (ftx's weight-only folder has no
// float ones beside them): a Linear left float is refused by name, as is a quantised tensor that is
// no layer GEMM (an lm_head).
std::set<std::string> plan_quantized_import(const HfFamily& family, HfCheckpoint& in, const ArchLayout& layout,
                                       ConversionPlan& plan);

}  // namespace ftx::hf
