// HuggingFace Mixtral (a mixture of experts on Mistral's attention; llama_like.cc has what it
// shares with Llama and Mistral, moe_like.cc what it shares with Qwen2-MoE and Qwen3-MoE) -> FT's GPT-MoE layout (docs/ft-layout.md#mixture-of-experts):
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
#include <regex>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf/moe_like.h"
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
  // Source names after `model.` is stripped; transformers 5 renames block_sparse_moe to mlp in
  // memory, and both spellings are read.
  make_moe_family(f, "hf-mixtral",
                  {{kL + R"((?:block_sparse_moe|mlp)\.gate\.weight)", kFL + "mlp.moe.gate.wg.weight", Role::kReplicated,
                    true}},
                  {std::regex(R"(layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(w1|w2|w3)\.weight)"), "w1",
                   "w3", "w2", "model.layers.{L}.block_sparse_moe.experts.{E}.{P}.weight"});
  return f;
}

}  // namespace

FTX_HF_FAMILY(mixtral);

}  // namespace ftx::hf
