#include "lib/convert/hf/moe_like.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <utility>

#include "formats/error.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

std::string replaced(std::string s, const std::string& what, const std::string& with) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size()))
    s.replace(at, what.size(), with);
  return s;
}

// The dense family's hooks, with the experts taken out of the layout and stacked at the end.
class ExpertHooks : public TensorHooks {
 public:
  ExpertHooks(std::unique_ptr<TensorHooks> dense, ExpertNames names)
      : dense_(std::move(dense)), names_(std::move(names)) {}

  bool layout_takes(const Source& s, std::string& name, std::vector<TensorView>& shards,
                    ConversionPlan& plan) override {
    std::smatch m;
    if (std::regex_match(name, m, names_.pattern)) {
      const int64_t layer = std::stoll(m[1].str()), expert = std::stoll(m[2].str());
      auto& slot = experts_[{layer, m[3].str()}];
      FTX_CHECK(slot.emplace(expert, &s).second, s.origin, "expert tensor given twice");
      return false;
    }
    share();
    return dense_->layout_takes(s, name, shards, plan);
  }

  void fuse_qkv(const std::string& ft_name, const std::array<const Source*, 3>& parts, const JobContext& ctx,
                ConversionPlan& plan) override {
    share();
    dense_->fuse_qkv(ft_name, parts, ctx, plan);
  }

  void finish(ConversionPlan& plan) override {
    const ModelConfig& c = plan.cfg;
    for (const auto& [key, got] : experts_) {
      FTX_CHECK(key.first < c.num_layer, got.begin()->second->origin,
                "layer " + std::to_string(key.first) + " is beyond num_hidden_layers = " + std::to_string(c.num_layer));
      FTX_CHECK(c.is_moe_layer(key.first), got.begin()->second->origin,
                "layer " + std::to_string(key.first) + " has experts but config.json makes it a dense layer");
    }
    const std::pair<std::string, std::pair<const char*, OutSplit>> parts[] = {
        {names_.activated, {"mlp.moe.experts.dense_h_to_4h.weight", OutSplit::kColumn}},
        {names_.multiplied, {"mlp.moe.experts.dense_h_to_4h.gate.weight", OutSplit::kColumn}},
        {names_.output, {"mlp.moe.experts.dense_4h_to_h.weight", OutSplit::kRow}}};
    for (int64_t l : c.moe_layers) {
      for (const auto& [w, ft] : parts) {
        const auto& got = experts_[{l, w}];
        TensorJob job;
        job.name = "model.layers." + std::to_string(l) + "." + ft.first;
        for (int64_t e = 0; e < c.expert_num; ++e) {
          auto it = got.find(e);
          FTX_CHECK(it != got.end(), in->folder,
                    "has no tensor '" +
                        replaced(replaced(replaced(names_.spelled, "{L}", std::to_string(l)), "{E}", std::to_string(e)),
                                 "{P}", w) +
                        "' (" + std::to_string(c.expert_num) + " experts)");
          job.shards.push_back(it->second->t);
        }
        FTX_CHECK(static_cast<int64_t>(got.size()) == c.expert_num, got.rbegin()->second->origin,
                  "expert " + std::to_string(got.rbegin()->first) + " is beyond the " + std::to_string(c.expert_num) +
                      " experts of config.json");
        job.source = got.begin()->second->origin + " (+ " + std::to_string(c.expert_num - 1) + " experts)";
        job.transpose = true;
        job.split = ft.second;
        job.stack_experts = true;
        plan.jobs.push_back(std::move(job));
      }
    }
    share();
    dense_->finish(plan);
  }

 private:
  void share() {
    dense_->in = in;
    dense_->layout = layout;
  }
  std::unique_ptr<TensorHooks> dense_;
  ExpertNames names_;
  std::map<std::pair<int64_t, std::string>, std::map<int64_t, const Source*>> experts_;
};

}  // namespace

void make_moe_family(HfFamily& f, const std::string& layout_name, const std::vector<LayoutRule>& rules,
                     ExpertNames names) {
  const auto dense_layout = f.layout;
  // One layout per dense layout (the family's config may pick among them).
  auto cache = std::make_shared<std::map<const ArchLayout*, std::unique_ptr<ArchLayout>>>();
  f.layout = [dense_layout, layout_name, rules, cache](HfCheckpoint& in, const ModelConfig& c) -> const ArchLayout& {
    const ArchLayout& dense = dense_layout(in, c);
    std::unique_ptr<ArchLayout>& l = (*cache)[&dense];
    if (!l) {
      l = std::make_unique<ArchLayout>(dense);
      l->name = layout_name;
      l->rules.insert(l->rules.end(), rules.begin(), rules.end());
    }
    return *l;
  };
  const auto dense_hooks = f.hooks;
  f.hooks = [dense_hooks, names] { return std::make_unique<ExpertHooks>(dense_hooks(), names); };
}

std::vector<KeyRule> qwen_moe_keys() {
  constexpr KeyUse R = KeyUse::kRead;
  constexpr KeyUse N = KeyUse::kNoEffect;
  return {
      {"num_experts_per_tok", R, "moe_top_k, in [1, num_experts] (others refused)"},
      {"norm_topk_prob", R, "false: the top k probabilities as they are (moe_router softmax_topk); true: renormalised to sum to 1 (softmax_topk_renorm)"},
      {"moe_intermediate_size", R, "moe_inter_size, each expert's width"},
      {"decoder_sparse_step", R, "layers with index + 1 a multiple of it have experts (moe_layers); a positive integer"},
      {"mlp_only_layers", R, "layers that stay dense FFNs of intermediate_size (each in [0, num_hidden_layers))"},
      {"output_router_logits", N, "returns the router logits for the auxiliary loss; the tokens are the same"},
      {"router_aux_loss_coef", N, "weight of the training load-balancing loss"},
  };
}

void read_qwen_moe(const json& j, const std::string& origin, int64_t experts, const std::string& experts_key,
                   const QwenMoeDefaults& defaults, ModelConfig& c) {
  FTX_CHECK(experts >= 0 && experts <= (1 << 16), origin,
            experts_key + " = " + std::to_string(experts) + " is not a number of experts ftx runs (0 to 65536)");
  const int64_t step = int_or(j, "decoder_sparse_step", 1, origin);
  FTX_CHECK(step >= 1, origin, "decoder_sparse_step = " + std::to_string(step) + " is not a positive integer");
  std::vector<int64_t> dense;
  auto only = j.find("mlp_only_layers");
  if (only != j.end() && !only->is_null()) {
    FTX_CHECK(only->is_array(), origin, "mlp_only_layers = " + only->dump() + " is not a list of layer indices");
    for (const json& l : *only) {
      FTX_CHECK(l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() < c.num_layer, origin,
                "mlp_only_layers holds " + l.dump() + ", not a layer index in [0, num_hidden_layers = " +
                    std::to_string(c.num_layer) + ")");
      dense.push_back(l.get<int64_t>());
    }
  }
  c.moe_layers.clear();
  for (int64_t l = 0; experts > 0 && l < c.num_layer; ++l)
    if (std::find(dense.begin(), dense.end(), l) == dense.end() && (l + 1) % step == 0) c.moe_layers.push_back(l);
  if (c.moe_layers.empty()) {  // transformers builds every layer as a dense FFN
    c.expert_num = 0;
    return;
  }
  c.expert_num = experts;
  c.moe_top_k = int_or(j, "num_experts_per_tok", defaults.top_k, origin);
  FTX_CHECK(c.moe_top_k >= 1 && c.moe_top_k <= c.expert_num, origin,
            "num_experts_per_tok = " + std::to_string(c.moe_top_k) + " is not in [1, " + experts_key + " = " +
                std::to_string(c.expert_num) + "]");
  c.moe_routing = bool_or(j, "norm_topk_prob", false, origin) ? MoeRouting::kSoftmaxTopKRenorm : MoeRouting::kSoftmaxTopK;
  c.moe_inter_size = dim_or(j, "moe_intermediate_size", defaults.moe_inter, origin);
}

}  // namespace ftx::hf
