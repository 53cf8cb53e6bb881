#pragma once
// What the mixture-of-experts families (Mixtral, Qwen2-MoE, Qwen3-MoE) share (moe_like.cc), on a
// llama-like family: the experts, one nn.Linear per expert and projection in the checkpoint, taken
// out of the layout and stacked per layer into FT's GPT-MoE expert files
// (docs/ft-layout.md#mixture-of-experts): the activated projection -> mlp.moe.experts.dense_h_to_4h,
// the multiplied one -> ...dense_h_to_4h.gate, the output one -> ...dense_4h_to_h, each expert sliced
// over the ranks as a dense FFN is. Each family's file says how its experts are named, adds its
// router (and shared expert) as layout rules and reads its own keys.
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "lib/convert/hf/family.h"

namespace ftx::hf {

struct ExpertNames {
  // Over the source name after `model.`: groups 1 the layer, 2 the expert, 3 the projection.
  std::regex pattern;
  // The projections' names (group 3): Mixtral's w1, w3, w2; Qwen's gate_proj, up_proj, down_proj.
  std::string activated, multiplied, output;
  // How a missing tensor is named: "{L}", "{E}" and "{P}" replaced by layer, expert and projection.
  std::string spelled;
};

// `f`, a llama-like family, as a mixture of experts: its layout (the dense family's, named
// `layout_name`) with `rules` added (the router's and the like), and hooks that stack the experts
// of every layer ModelConfig::moe_layers lists; experts of any other layer are refused.
void make_moe_family(HfFamily& f, const std::string& layout_name, const std::vector<LayoutRule>& rules,
                     ExpertNames names);

// Qwen2-MoE's and Qwen3-MoE's layers of experts: the layers whose index is not in mlp_only_layers
// and whose index + 1 is a multiple of decoder_sparse_step (transformers' Qwen2MoeDecoderLayer),
// when there are experts (`experts`, read by the family from `experts_key`); the others are dense
// FFNs of intermediate_size. Reads those keys and num_experts_per_tok, norm_topk_prob and
// moe_intermediate_size into `c`; a model with no layer of experts is a dense one (expert_num 0).
// `defaults` are the config class's for absent keys.
struct QwenMoeDefaults {
  int64_t top_k = 0, moe_inter = 0;
};
void read_qwen_moe(const json& j, const std::string& origin, int64_t experts, const std::string& experts_key,
                   const QwenMoeDefaults& defaults, ModelConfig& c);
// The KeyRules of the keys read_qwen_moe reads (but the family's number of experts) and of the
// router's training-only keys.
std::vector<KeyRule> qwen_moe_keys();

}  // namespace ftx::hf
