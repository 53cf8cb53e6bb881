// HuggingFace Qwen3-MoE (Qwen3-30B-A3B, -235B-A22B; llama_like.cc has its attention, as Qwen3's
// with per-head q/k norms, moe_like.cc its experts) -> FT's GPT-MoE layout
// (docs/ft-layout.md#mixture-of-experts):
//  * with use_sliding_window, sliding_window on every layer (no layer_types, unlike Qwen2's);
//  * head_dim is its own key (hidden_size / num_attention_heads when absent, Qwen3MoeConfig's);
//  * the layers read_qwen_moe picks (decoder_sparse_step, mlp_only_layers) hold num_experts experts
//    (5.x saves num_local_experts) of moe_intermediate_size, num_experts_per_tok run per token:
//    softmax over every expert, the top k, renormalised with norm_topk_prob (true in the released
//    models); the other layers are dense FFNs of intermediate_size; no shared expert;
//  * mlp.gate [E, H] -> mlp.moe.gate.wg.weight [H, E], whole on every rank;
//  * mlp.experts.e.gate_proj / up_proj / down_proj -> the stacked expert files (moe_like.h).
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
      join(qwen3_rope_keys(llama_like_keys("size_per_head (absent: hidden_size / num_attention_heads); hidden_size "
                                           "may differ from heads x head_dim")),
           {
               {"sliding_window", R, "sliding_window (null: none); read only with use_sliding_window true"},
               {"use_sliding_window", R, "false: no window; true: sliding_window on every layer"},
               {"attention_bias", R, "false: no biases; true (q/k/v and o biases) refused"},
               {"num_experts", R, "4.x: expert_num ([structure]); 0: no layer of experts (a dense model)"},
               {"num_local_experts", R, "5.x's name of num_experts"},
           }),
      qwen_moe_keys());
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) { no_attention_bias(j, origin, "Qwen3-MoE", c); }

// Qwen3MoeConfig has no layer_types: with use_sliding_window every layer slides.
int64_t window(const json& j, int64_t, const std::string& origin) {
  return bool_or(j, "use_sliding_window", false, origin) ? sliding_window_key(j, origin) : 0;
}

void read_experts(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  const bool older = j.contains("num_experts") && !j["num_experts"].is_null();
  const char* key = older ? "num_experts" : "num_local_experts";
  const int64_t experts = int_or(j, key, 128, origin);  // Qwen3MoeConfig's default
  if (older && j.contains("num_local_experts") && !j["num_local_experts"].is_null())
    FTX_CHECK(int_or(j, "num_local_experts", 0, origin) == experts, origin,
              "num_local_experts = " + j["num_local_experts"].dump() + " is not num_experts = " + std::to_string(experts));
  read_qwen_moe(j, origin, experts, key, {8, 768}, plan.cfg);
}

HfFamily qwen3_moe() {
  LlamaLike s;
  s.family.model_type = "qwen3_moe";
  s.family.order = 170;
  s.family.display = "Qwen3-MoE";
  s.family.examples = "Qwen3-30B-A3B, Qwen3-235B-A22B and their fine-tunes";
  s.family.keys = keys;
  s.default_eos = 151643;
  s.biases = biases;
  s.sliding_window = window;
  s.default_head_dim = LlamaLike::kHeadDimFromHidden;
  s.qk_norm = true;
  s.partial_rotary = false;
  s.rope_types = qwen3_rope_types();
  s.more = read_experts;
  HfFamily f = llama_like_family(s);
  make_moe_family(f, "hf-qwen3-moe",
                  {{kL + R"(mlp\.gate\.weight)", kFL + "mlp.moe.gate.wg.weight", Role::kReplicated, true}},
                  {std::regex(R"(layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight)"),
                   "gate_proj", "up_proj", "down_proj", "model.layers.{L}.mlp.experts.{E}.{P}.weight"});
  return f;
}

}  // namespace

FTX_HF_FAMILY(qwen3_moe);

}  // namespace ftx::hf
