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

namespace ftx::quant {

namespace {

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

bool is_qkv(const std::string& name) { return name.find("attention.query_key_value.") != std::string::npos; }

bool is_neox_bias_sum(const ModelConfig& cfg, const std::string& name) {
  return cfg.arch == Architecture::kGptNeoX && ends_with(name, "mlp.attention.bias.sum");
}

}  // namespace

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
  // The QKV columns are split below as [3, H] (multi-head) or [H | d | d] (multi-query); grouped-query
  // attention's [H | G·d | G·d] is neither, and reading it as either would calibrate and export
  // wrongly split matrices.
  const int64_t kv = m.cfg.kv_head_num;
  FTX_CHECK(kv <= 0 || kv == 1 || kv == m.cfg.head_num, dir + "/config.ini",
            "grouped-query attention (kv_head_num " + std::to_string(kv) + " of head_num " +
                std::to_string(m.cfg.head_num) + ") has no smoothquant path (multi-head and multi-query only)");
  const int64_t tp = m.cfg.tensor_para_size;
  ModelWeights::check_files(dir, m.cfg, static_cast<int>(tp));
  const bool mqa = m.cfg.attention == AttentionKind::kMultiQuery;
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
    // QKV's last axis is [3, H]: each rank holds [3, H/T] of it. Multi-query: [H | d | d], each rank
    // [H/T | d | d] (K and V whole on every rank).
    const int64_t segs = split == OutSplit::kColumn && is_qkv(f.name) && !mqa ? 3 : 1;
    const int64_t kv_cols = split == OutSplit::kColumn && is_qkv(f.name) && mqa ? 2 * m.cfg.size_per_head : 0;
    std::vector<float> buf;
    for (size_t r = 0; r < parts.size(); ++r) {
      const FtWeightFile& p = parts[r];
      auto file = MappedFile::open(dir + "/" + p.file_name());
      const size_t n = static_cast<size_t>(p.numel());
      buf.resize(n);
      ops::convert_weight(file->slice(0, n * dtype_size(dt), p.file_name()), dt, buf.data(), DType::kFloat32, n);
      if (split == OutSplit::kReplicated) {
        t.data = buf;
      } else if (split == OutSplit::kRow) {
        std::memcpy(t.data.data() + r * n, buf.data(), n * sizeof(float));
      } else {
        const int64_t seg_full = (cols - kv_cols) / segs, seg_part = seg_full / static_cast<int64_t>(parts.size());
        const int64_t row_part = segs * seg_part + kv_cols;
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t s = 0; s < segs; ++s)
            std::memcpy(t.data.data() + i * cols + s * seg_full + static_cast<int64_t>(r) * seg_part,
                        buf.data() + i * row_part + s * seg_part, static_cast<size_t>(seg_part) * sizeof(float));
          if (kv_cols > 0 && r == 0)  // the replicated K and V, from rank 0
            std::memcpy(t.data.data() + i * cols + seg_full, buf.data() + i * row_part + seg_part,
                        static_cast<size_t>(kv_cols) * sizeof(float));
        }
      }
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
    if (job.split == OutSplit::kColumn && is_qkv(kv.first)) {
      if (cfg.attention == AttentionKind::kMultiQuery) {  // [H | d | d]: K and V whole on every rank
        const int64_t d = cfg.size_per_head;
        job.seg_sizes = {t.shape.back() - 2 * d, d, d};
        job.seg_split = {true, false, false};
      } else {
        job.segments = 3;
      }
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
