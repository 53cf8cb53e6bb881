#include "lib/convert/mcore_experts.h"

#include <regex>

#include "formats/error.h"
#include "lib/convert/dcp_shards.h"

namespace ftx {

namespace {

const char* const kFt[] = {"", "mlp.moe.experts.dense_h_to_4h.weight", "mlp.moe.experts.dense_4h_to_h.weight"};

[[noreturn]] void refuse_shared(const std::string& name, const std::string& origin) {
  throw Error(origin, "has '" + name + "': shared experts (mlp.shared_experts) are not supported");
}

// One FT file's job over every expert of a layer: `per_expert[e]` are expert e's training shards.
// linear_fc1 merges and splits its outputs (the last axis once transposed), linear_fc2 its inputs.
void stack_job(int64_t layer, int fc, int take_half, bool gate_file,
               const std::vector<std::vector<TensorView>>& per_expert, const std::string& source,
               std::vector<TensorJob>& jobs) {
  TensorJob j;
  j.name = "model.layers." + std::to_string(layer) + "." + kFt[fc];
  if (gate_file) j.name.replace(j.name.find("dense_h_to_4h."), 14, "dense_h_to_4h.gate.");
  j.source = source;
  j.stack_experts = true;
  j.expert_shards = static_cast<int64_t>(per_expert.front().size());
  for (size_t e = 0; e < per_expert.size(); ++e) {
    FTX_CHECK(static_cast<int64_t>(per_expert[e].size()) == j.expert_shards, source,
              "expert " + std::to_string(e) + " is stored in " + std::to_string(per_expert[e].size()) +
                  " pieces, expert 0 in " + std::to_string(j.expert_shards));
    j.shards.insert(j.shards.end(), per_expert[e].begin(), per_expert[e].end());
  }
  j.transpose = true;
  j.merge_axis = fc == 1 ? 1 : 0;
  j.split = fc == 1 ? OutSplit::kColumn : OutSplit::kRow;
  j.take_half = take_half;
  jobs.push_back(std::move(j));
}

}  // namespace

bool is_mcore_expert_name(const std::string& name) {
  return name.find("mlp.experts.") != std::string::npos || name.find("mlp.shared_experts.") != std::string::npos;
}

void McoreExperts::add_legacy(const std::string& name, int64_t layer_offset, int64_t tp_rank, int64_t ep_rank,
                              const TensorView& t, const std::string& origin) {
  if (name.find("_extra_state") != std::string::npos) return;
  if (name.find("mlp.shared_experts.") != std::string::npos) refuse_shared(name, origin);
  static const std::regex sequential(R"((?:decoder\.)?layers\.(\d+)\.mlp\.experts\.local_experts\.(\d+)\.linear_fc([12])\.weight)");
  static const std::regex grouped(R"((?:decoder\.)?layers\.(\d+)\.mlp\.experts\.linear_fc([12])\.weight(\d+))");
  std::smatch m;
  int64_t layer = 0, local = 0;
  int fc = 0;
  if (std::regex_match(name, m, sequential)) {
    layer = std::stoll(m[1]), local = std::stoll(m[2]), fc = std::stoi(m[3]);
  } else if (std::regex_match(name, m, grouped)) {
    layer = std::stoll(m[1]), fc = std::stoi(m[2]), local = std::stoll(m[3]);
  } else {
    throw Error(origin, "unexpected expert tensor '" + name +
                            "' (experts' linear_fc1/linear_fc2 weights only: expert biases are not supported)");
  }
  const int64_t per_rank = a_.experts / a_.ep;
  FTX_CHECK(local < per_rank, origin,
            "has '" + name + "': expert " + std::to_string(local) + " of an expert-parallel rank holding " +
                std::to_string(per_rank) + " (num_experts " + std::to_string(a_.experts) +
                " / expert_model_parallel_size " + std::to_string(a_.ep) + ")");
  const auto key = std::make_tuple(layer + layer_offset, fc, ep_rank * per_rank + local);
  auto& v = shards_[key];
  if (v.empty()) v.resize(static_cast<size_t>(a_.tp));
  v[static_cast<size_t>(tp_rank)] = t;
  origins_[key] = origin;
}

void McoreExperts::build_legacy_jobs(const std::string& origin, std::vector<TensorJob>& jobs) const {
  for (int64_t l = 0; l < a_.num_layers; ++l)
    for (int fc = 1; fc <= 2; ++fc) {
      std::vector<std::vector<TensorView>> per_expert;
      for (int64_t e = 0; e < a_.experts; ++e) {
        auto it = shards_.find(std::make_tuple(l, fc, e));
        for (int64_t t = 0; t < a_.tp; ++t) {
          if (it != shards_.end() && !it->second[static_cast<size_t>(t)].shape.empty()) continue;
          const int64_t per_rank = a_.experts / a_.ep;
          throw Error(origin, "has no 'decoder.layers." + std::to_string(l) + ".mlp.experts.local_experts." +
                                  std::to_string(e % per_rank) + ".linear_fc" + std::to_string(fc) +
                                  ".weight' on tensor parallel rank " + std::to_string(t) + ", expert-parallel rank " +
                                  std::to_string(e / per_rank) + " (global expert " + std::to_string(e) + " of " +
                                  std::to_string(a_.experts) + ")");
        }
        per_expert.push_back(it->second);
      }
      const std::string source = origins_.at(std::make_tuple(l, fc, int64_t{0})) + " (layer " + std::to_string(l) +
                                 ", " + std::to_string(a_.experts) + " experts)";
      if (fc == 1 && a_.activation.is_gated()) {  // each shard: [activated | multiplied]
        stack_job(l, 1, 0, false, per_expert, source, jobs);
        stack_job(l, 1, 1, true, per_expert, source, jobs);
      } else {
        stack_job(l, fc, -1, false, per_expert, source, jobs);
      }
    }
}

void add_mcore_dist_expert_jobs(const McoreArgs& a, const DcpCheckpoint& ck, const std::string& name,
                                const std::string& layout, std::vector<TensorJob>& jobs) {
  const std::string what = ck.origin() + ":" + name;
  if (layout.find("_extra_state") != std::string::npos) return;
  if (layout.find("mlp.shared_experts.") != std::string::npos) refuse_shared(name, ck.origin());
  static const std::regex weight(R"(mlp\.experts\.experts\.linear_fc([12])\.weight)");
  std::smatch m;
  if (!std::regex_match(layout, m, weight))
    throw Error(ck.origin(), "unexpected expert tensor '" + name +
                                 "' (experts' linear_fc1/linear_fc2 weights only: expert biases are not supported)");
  const int fc = std::stoi(m[1]);
  const DcpTensorInfo& info = ck.info(name);
  FTX_CHECK(info.shape.size() == 4 && info.shape[0] == a.num_layers && info.shape[1] == a.experts, what,
            "has shape " + shape_to_string(info.shape) + ", expected [" + std::to_string(a.num_layers) + ", " +
                std::to_string(a.experts) + ", out, in] (num_layers, num_experts)");
  const std::vector<int64_t> shape(info.shape.begin() + 2, info.shape.end());
  const ChunkViews chunks = ck.chunks(name);
  const bool gated = fc == 1 && a.activation.is_gated();
  for (int64_t l = 0; l < a.num_layers; ++l) {
    const ChunkViews layer = select_index(chunks, l);
    const std::string source = what + "[" + std::to_string(l) + "]";
    // A gated linear_fc1 is stored globally as [activated half | multiplied half] on its output
    // axis (as a dense one is): each half is one FT file.
    for (int h = 0; h < (gated ? 2 : 1); ++h) {
      std::vector<std::vector<TensorView>> per_expert;
      for (int64_t e = 0; e < a.experts; ++e) {
        ChunkViews ex = select_index(layer, e);
        std::vector<int64_t> s = shape;
        if (gated) {
          FTX_CHECK(shape[0] % 2 == 0, what, "gated linear_fc1 has an odd output size");
          s[0] = shape[0] / 2;
          ex = narrow_range(ex, 0, h * s[0], (h + 1) * s[0]);
        }
        per_expert.push_back(shards_along(ex, s, fc == 1 ? 0 : 1, source + "[expert " + std::to_string(e) + "]"));
      }
      stack_job(l, fc, -1, h == 1, per_expert, source, jobs);
    }
  }
}

}  // namespace ftx
