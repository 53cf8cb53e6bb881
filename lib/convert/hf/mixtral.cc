// HuggingFace Mixtral (a mixture of experts on Mistral's attention; llama_like.cc has what it
// shares with Llama and Mistral) -> FT's GPT-MoE layout (docs/ft-layout.md#mixture-of-experts):
//  * every layer's FFN is num_local_experts experts (FT's [structure] gpt_with_moe = 1, expert_num,
//    moe_layers = all layers) of which num_experts_per_tok are run per token (ftx's moe_top_k;
//    FT takes moe_k at run time), weighted by Mixtral's router: softmax over all experts, the top k,
//    renormalised (moe_router = softmax_topk_renorm);
//  * block_sparse_moe.gate [E, H] -> mlp.moe.gate.wg.weight [H, E], whole on every rank;
//  * experts.e.w1 (activated, silu), w3 (multiplied) and w2 (down) -> the experts stacked per layer,
//    mlp.moe.experts.dense_h_to_4h.weight [E, H, I/T], ...dense_h_to_4h.gate.weight [E, H, I/T] and
//    ...dense_4h_to_h.weight [E, I/T, H]: each expert sliced over the ranks as a dense FFN is (the
//    dense layout's gate_proj / up_proj / down_proj -> dense_h_to_4h / dense_h_to_4h.gate /
//    dense_4h_to_h), one all-reduce per layer.
// transformers 5 saves the experts under these per-expert names (its fused gate_up_proj exists only
// in memory); a checkpoint holding the fused form is refused as an unexpected tensor.
#include <array>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = join(
      llama_like_keys(),
      {
          {"sliding_window", R, "sliding_window (null: none)"},
          {"num_local_experts", R, "expert_num ([structure]); every layer is a layer of experts (moe_layers)"},
          {"num_experts_per_tok", R, "moe_top_k, in [1, num_local_experts] (others refused)"},
          {"router_jitter_noise", N,
           "multiplies the router's input by noise in training only (transformers skips it in eval mode)"},
          {"output_router_logits", N, "returns the router logits for the auxiliary loss; the tokens are the same"},
          {"router_aux_loss_coef", N, "weight of the training load-balancing loss"},
      });
  return k;
}

// The MoE keys: the experts and the router's k.
void read_experts(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  ModelConfig& c = plan.cfg;
  c.expert_num = int_or(j, "num_local_experts", 8, origin);
  FTX_CHECK(c.expert_num >= 1 && c.expert_num <= (1 << 16), origin,
            "num_local_experts = " + std::to_string(c.expert_num) + " is not a number of experts ftx runs (1 to 65536)");
  c.moe_top_k = int_or(j, "num_experts_per_tok", 2, origin);
  FTX_CHECK(c.moe_top_k >= 1 && c.moe_top_k <= c.expert_num, origin,
            "num_experts_per_tok = " + std::to_string(c.moe_top_k) + " is not in [1, num_local_experts = " +
                std::to_string(c.expert_num) + "]");
  c.moe_routing = MoeRouting::kSoftmaxTopKRenorm;
  c.moe_layers.clear();
  for (int64_t l = 0; l < c.num_layer; ++l) c.moe_layers.push_back(l);
}

// Source names after `model.` is stripped. transformers 5 renames block_sparse_moe to mlp in memory;
// both spellings are read.
const std::regex& expert_name() {
  static const std::regex re(R"(layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(w1|w2|w3)\.weight)");
  return re;
}

// The dense family's hooks, with the experts taken out of the layout and stacked at the end.
class Hooks : public TensorHooks {
 public:
  explicit Hooks(std::unique_ptr<TensorHooks> dense) : dense_(std::move(dense)) {}

  bool layout_takes(const Source& s, std::string& name, std::vector<TensorView>& shards,
                    ConversionPlan& plan) override {
    std::smatch m;
    if (std::regex_match(name, m, expert_name())) {
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
    // w1 is the activated projection (FT's dense_h_to_4h), w3 the multiplied one (.gate), w2 the output.
    const std::pair<const char*, std::pair<const char*, OutSplit>> parts[] = {
        {"w1", {"mlp.moe.experts.dense_h_to_4h.weight", OutSplit::kColumn}},
        {"w3", {"mlp.moe.experts.dense_h_to_4h.gate.weight", OutSplit::kColumn}},
        {"w2", {"mlp.moe.experts.dense_4h_to_h.weight", OutSplit::kRow}}};
    for (int64_t l : c.moe_layers) {
      for (const auto& [w, ft] : parts) {
        const auto& got = experts_[{l, w}];
        TensorJob job;
        job.name = "model.layers." + std::to_string(l) + "." + ft.first;
        for (int64_t e = 0; e < c.expert_num; ++e) {
          auto it = got.find(e);
          FTX_CHECK(it != got.end(), in->folder,
                    "has no tensor 'model.layers." + std::to_string(l) + ".block_sparse_moe.experts." +
                        std::to_string(e) + "." + w + ".weight' (num_local_experts = " + std::to_string(c.expert_num) +
                        ")");
          job.shards.push_back(it->second->t);
        }
        FTX_CHECK(static_cast<int64_t>(got.size()) == c.expert_num, got.rbegin()->second->origin,
                  "expert " + std::to_string(got.rbegin()->first) + " is beyond num_local_experts = " +
                      std::to_string(c.expert_num));
        job.source = got.begin()->second->origin + " (+ " + std::to_string(c.expert_num - 1) + " experts)";
        job.transpose = true;
        job.split = ft.second;
        job.stack_experts = true;
        plan.jobs.push_back(std::move(job));
      }
    }
    for (const auto& [key, got] : experts_)
      FTX_CHECK(key.first < c.num_layer, got.begin()->second->origin,
                "layer " + std::to_string(key.first) + " is beyond num_hidden_layers = " + std::to_string(c.num_layer));
    share();
    dense_->finish(plan);
  }

 private:
  void share() {
    dense_->in = in;
    dense_->layout = layout;
  }
  std::unique_ptr<TensorHooks> dense_;
  std::map<std::pair<int64_t, std::string>, std::map<int64_t, const Source*>> experts_;
};

HfFamily mixtral() {
  LlamaLike s;
  s.family.model_type = "mixtral";
  s.family.order = 150;
  s.family.display = "Mixtral";
  s.family.examples = "Mixtral 8x7B and 8x22B (v0.1) and their fine-tunes";
  s.family.keys = keys;
  s.default_eos = 2;
  s.biases = [](const json&, const std::string&, ModelConfig& c) {
    c.has_bias = false;
    c.qkv_bias = false;
  };
  s.sliding_window = [](const json& j, int64_t, const std::string& origin) { return sliding_window_key(j, origin); };
  s.default_theta = 1000000.0;  // MixtralConfig's rope_theta when absent
  s.more = read_experts;
  HfFamily f = llama_like_family(s);
  const auto dense_layout = f.layout;
  f.layout = [dense_layout](HfCheckpoint& in, const ModelConfig& c) -> const ArchLayout& {
    static const ArchLayout l = [&] {
      ArchLayout a = dense_layout(in, c);
      a.name = "hf-mixtral";
      a.rules.push_back({kL + R"((?:block_sparse_moe|mlp)\.gate\.weight)", kFL + "mlp.moe.gate.wg.weight",
                         Role::kReplicated, true});
      return a;
    }();
    return l;
  };
  const auto dense_hooks = f.hooks;
  f.hooks = [dense_hooks] { return std::make_unique<Hooks>(dense_hooks()); };
  return f;
}

}  // namespace

FTX_HF_FAMILY(mixtral);

}  // namespace ftx::hf
