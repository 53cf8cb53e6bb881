// HuggingFace Qwen2-MoE (Qwen1.5-MoE; llama_like.cc has its attention, as Qwen2's with q/k/v biases,
// moe_like.cc its experts) -> FT's GPT-MoE layout with ftx's shared expert
// (docs/ft-layout.md#mixture-of-experts):
//  * the layers read_qwen_moe picks (decoder_sparse_step, mlp_only_layers) hold num_experts experts
//    of moe_intermediate_size, num_experts_per_tok run per token: softmax over every expert, the
//    top k, renormalised only with norm_topk_prob (softmax_topk_renorm; false, as the released
//    models: softmax_topk); the other layers are dense FFNs of intermediate_size;
//  * mlp.gate [E, H] -> mlp.moe.gate.wg.weight [H, E], whole on every rank;
//  * mlp.experts.e.gate_proj / up_proj / down_proj -> the stacked expert files (moe_like.h);
//  * mlp.shared_expert.gate_proj / up_proj / down_proj -> mlp.moe.shared_expert.dense_h_to_4h /
//    .dense_h_to_4h.gate / .dense_4h_to_h, sliced over the ranks as a dense FFN; its sigmoid gate
//    mlp.shared_expert_gate [1, H] -> mlp.moe.shared_expert_gate.weight [H, 1], whole on every rank.
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

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = join(
      join(llama_like_keys(),
           {
               {"sliding_window", R, "sliding_window (null: none); read only with use_sliding_window true"},
               {"use_sliding_window", R, "false: no window; true: window on the layers layer_types says"},
               {"max_window_layers", R, "4.x: layers from this index on slide; some sliding, some not is refused"},
               {"layer_types", R, "5.x: full_attention / sliding_attention per layer; a mix is refused"},
               {"qkv_bias", R, "true: q/k/v biases (qkv_bias = 1); false: none"},
               {"num_experts", R, "expert_num ([structure]); 0: no layer of experts (a dense model)"},
               {"shared_expert_intermediate_size", R, "moe_shared_expert_inter_size: the shared expert of every layer of experts"},
           }),
      qwen_moe_keys());
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) {
  c.has_bias = false;
  c.qkv_bias = bool_or(j, "qkv_bias", true, origin);
}

void read_experts(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  ModelConfig& c = plan.cfg;
  // Qwen2MoeConfig's defaults for absent keys.
  read_qwen_moe(j, in.cfg_path, int_or(j, "num_experts", 60, in.cfg_path), "num_experts", {4, 1408}, c);
  if (c.is_moe()) c.moe_shared_inter_size = dim_or(j, "shared_expert_intermediate_size", 5632, in.cfg_path);
}

HfFamily qwen2_moe() {
  LlamaLike s;
  s.family.model_type = "qwen2_moe";
  s.family.order = 160;
  s.family.display = "Qwen2-MoE";
  s.family.examples = "Qwen1.5-MoE-A2.7B and Qwen2-57B-A14B";
  s.family.keys = keys;
  s.default_eos = 151643;
  s.biases = biases;
  s.sliding_window = qwen_sliding_window;
  s.more = read_experts;
  HfFamily f = llama_like_family(s);
  const std::string m = kL + R"(mlp\.shared_expert\.)", ft = kFL + "mlp.moe.shared_expert.";
  make_moe_family(f, "hf-qwen2-moe",
                  {{kL + R"(mlp\.gate\.weight)", kFL + "mlp.moe.gate.wg.weight", Role::kReplicated, true},
                   {m + R"(gate_proj\.weight)", ft + "dense_h_to_4h.weight", Role::kColumn, true},
                   {m + R"(up_proj\.weight)", ft + "dense_h_to_4h.gate.weight", Role::kColumn, true},
                   {m + R"(down_proj\.weight)", ft + "dense_4h_to_h.weight", Role::kRow, true},
                   {kL + R"(mlp\.shared_expert_gate\.weight)", kFL + "mlp.moe.shared_expert_gate.weight",
                    Role::kReplicated, true}},
                  {std::regex(R"(layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight)"),
                   "gate_proj", "up_proj", "down_proj", "model.layers.{L}.mlp.experts.{E}.{P}.weight"});
  return f;
}

}  // namespace

FTX_HF_FAMILY(qwen2_moe);

}  // namespace ftx::hf
