#pragma once
// HostModel: every tensor of an FT folder, merged over its TP ranks into the full (unsplit) tensor,
// in fp32 on the host. SmoothQuant works on full tensors (TensorRT-LLM's generate_int8 quantizes
// the whole matrix and only then splits), and writes them back split for any TP size.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/convert/conversion.h"
#include "lib/model/model_config.h"
#include "lib/model/qkv_columns.h"

namespace ftx::quant {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

struct HostModel {
  ModelConfig cfg;  // tensor_para_size = the folder's
  std::string dir;
  std::map<std::string, HostTensor> tensors;  // FT name -> full tensor (shape of ft_weight_files(cfg, 1))

  // Reads `dir` (config.ini, every file ft_weight_files lists for the folder's TP size) and merges
  // the ranks: QKV per Q/K/V segment on the last axis (qkv_columns.h: multi-head, grouped-query,
  // and multi-query's whole K and V from rank 0), attention.dense and dense_4h_to_h on axis 0, the
  // other split tensors on the last axis.
  // GPT-NeoX's `mlp.attention.bias.sum` (stored ÷ TP) is multiplied back to the full sum. Errors as
  // ModelWeights::check_files.
  static HostModel read(const std::string& dir);

  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  HostTensor& at(const std::string& name);
  const HostTensor& at(const std::string& name) const;
};

// The conversion plan that writes `model` for inference TP size `tp` (ft_weight_files order and
// splits, as the converters write it); the caller adds the side files and runs write_conversion.
ConversionPlan plan_host_model(const HostModel& model, int64_t tp);
// The same, moving the tensors out of `model` (one copy of the weights in memory, not two).
ConversionPlan plan_host_model(HostModel&& model, int64_t tp);

// How a full FT tensor is split over TP ranks (docs/ft-layout.md#splitting-over-tp-ranks).
OutSplit ft_split_of(const std::string& name);

// The last-axis segments of a column-parallel tensor `name` of `cols` columns: QKV's [Q, K, V]
// (qkv_column_segments), else one split segment.
std::vector<ColumnSegment> column_segments_of(const ModelConfig& cfg, const std::string& name, int64_t cols);

}  // namespace ftx::quant
