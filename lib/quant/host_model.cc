#include "lib/quant/host_model.h"

#include <unistd.h>

#include <cstring>
#include <memory>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "formats/mapped_file.h"
#include "lib/engine/model_weights.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/ops/backend.h"
#include "lib/model/model_dir.h"
#include "lib/ops/host_math.h"

namespace ftx::quant {

namespace {

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

bool is_qkv(const std::string& name) { return name.find("attention.query_key_value.") != std::string::npos; }

bool is_neox_bias_sum(const ModelConfig& cfg, const std::string& name) {
  return cfg.ft_variant == FtVariant::kGptNeoX && ends_with(name, "mlp.attention.bias.sum");
}

}  // namespace

std::vector<ColumnSegment> column_segments_of(const ModelConfig& cfg, const std::string& name, int64_t cols) {
  if (ft_split_of(name) == OutSplit::kColumn && is_qkv(name)) return qkv_column_segments(cfg);
  return {{cols, true}};
}

OutSplit ft_split_of(const std::string& name) {
  if (ends_with(name, "attention.dense.weight") || ends_with(name, "mlp.dense_4h_to_h.weight")) return OutSplit::kRow;
  for (const char* col : {"attention.query_key_value.", "mlp.dense_h_to_4h."})
    if (name.find(col) != std::string::npos) return OutSplit::kColumn;
  return OutSplit::kReplicated;
}

HostTensor& HostModel::at(const std::string& name) {
  auto it = tensors.find(name);
  FTX_CHECK(it != tensors.end(), dir, "no tensor " + name);
  return it->second;
}
const HostTensor& HostModel::at(const std::string& name) const { return const_cast<HostModel*>(this)->at(name); }

HostModel HostModel::read(const std::string& dir) {
  HostModel m;
  m.dir = dir;
  m.cfg = read_model_config(dir);
  const int64_t tp = m.cfg.tensor_para_size;
  ModelWeights::check_files(dir, m.cfg, static_cast<int>(tp));
  const DType dt = m.cfg.weight_data_type;
  const std::vector<FtWeightFile> full = ft_weight_files(m.cfg, 1);
  for (const auto& f : full) {
    // The rank files of this tensor in the folder (one replicated file when not split).
    std::vector<FtWeightFile> parts;
    for (const auto& p : ft_weight_files(m.cfg, tp))
      if (p.name == f.name) parts.push_back(p);
    if (f.optional && ::access((dir + "/" + parts.front().file_name()).c_str(), F_OK) != 0) continue;
    HostTensor t;
    t.shape = f.shape;
    t.data.resize(static_cast<size_t>(f.numel()));
    const OutSplit split = parts.front().rank < 0 ? OutSplit::kReplicated : ft_split_of(f.name);
    const int64_t cols = f.shape.back(), rows = f.numel() / cols;
    const std::vector<ColumnSegment> segs = column_segments_of(m.cfg, f.name, cols);
    std::vector<float> buf;
    for (size_t r = 0; r < parts.size(); ++r) {
      const FtWeightFile& p = parts[r];
      auto file = MappedFile::open(dir + "/" + p.file_name());
      const size_t n = static_cast<size_t>(p.numel());
      buf.resize(n);
      ops::convert_weight(file->slice(0, n * dtype_size(dt), p.file_name()), dt, buf.data(), DType::kFloat32, n);
      if (split == OutSplit::kReplicated)
        t.data = buf;
      else if (split == OutSplit::kRow)
        std::memcpy(t.data.data() + r * n, buf.data(), n * sizeof(float));
      else
        put_rank_columns(t.data, buf.data(), rows, segs, tp, static_cast<int64_t>(r));
    }
    if (is_neox_bias_sum(m.cfg, f.name))
      for (float& v : t.data) v *= static_cast<float>(tp);
    m.tensors.emplace(f.name, std::move(t));
  }
  return m;
}

namespace {

// Each tensor becomes one job over an fp32 buffer the job owns, moved out of `tensors`.
ConversionPlan make_plan(const ModelConfig& cfg, const std::string& dir, std::map<std::string, HostTensor>& tensors,
                         int64_t tp) {
  ConversionPlan plan;
  plan.cfg = cfg;
  plan.source_format = "ft";
  plan.source_path = dir;
  for (auto& kv : tensors) {
    HostTensor& t = kv.second;
    auto owner = std::make_shared<std::vector<float>>(std::move(t.data));
    if (is_neox_bias_sum(cfg, kv.first))
      for (float& v : *owner) v /= static_cast<float>(tp);  // each rank adds its share before the all-reduce
    TensorJob job;
    job.name = kv.first;
    job.source = dir + ":" + kv.first;
    TensorView v;
    v.dtype = DType::kFloat32;
    v.shape = t.shape;
    v.storage.data = reinterpret_cast<const uint8_t*>(owner->data());
    v.storage.nbytes = owner->size() * sizeof(float);
    v.storage.keep_alive = owner;
    v.storage.origin = job.source;
    job.shards.push_back(v);
    job.split = ft_split_of(kv.first);
    if (job.split == OutSplit::kColumn && is_qkv(kv.first))
      for (const ColumnSegment& seg : qkv_column_segments(cfg)) {
        job.seg_sizes.push_back(seg.width);
        job.seg_split.push_back(seg.split);
      }
    plan.jobs.push_back(std::move(job));
  }
  return plan;
}

}  // namespace

ConversionPlan plan_host_model(const HostModel& model, int64_t tp) {
  HostModel copy = model;
  return plan_host_model(std::move(copy), tp);
}

ConversionPlan plan_host_model(HostModel&& model, int64_t tp) {
  ConversionPlan plan = make_plan(model.cfg, model.dir, model.tensors, tp);
  model.tensors.clear();
  return plan;
}

}  // namespace ftx::quant
