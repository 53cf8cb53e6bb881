#pragma once
// What Llama, Mistral, Qwen2, Qwen3 and Gemma 2 share (llama_like.cc): rotary, grouped-query
// attention, a gated FFN, RMSNorm, into the FT layout the Megatron Core conversions write for the
// same pieces. Each family's file adds its own keys, biases and sliding window.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/convert/hf/family.h"

namespace ftx::hf {

struct LlamaLike {
  // The registry's fields the family gives (model_type, spellings, order, display, examples,
  // keys); llama_like_family fills in the rest (reader, layout, hooks).
  HfFamily family;
  int64_t default_eos = 2;  // eos_token_id when absent
  // has_bias / qkv_bias from the family's bias keys.
  void (*biases)(const json& j, const std::string& origin, ModelConfig& c) = nullptr;
  // The sliding window the model attends with, 0 for none (null: none).
  int64_t (*sliding_window)(const json& j, int64_t layers, const std::string& origin) = nullptr;
  // > 0: head_dim is the family's own key with this default (Qwen3: 128), free of hidden_size;
  // kHeadDimFromHidden: its own key, hidden_size / num_attention_heads when absent (Qwen3-MoE);
  // 0: head_dim must be hidden_size / num_attention_heads (Llama, Mistral, Qwen2).
  static constexpr int64_t kHeadDimFromHidden = -1;
  int64_t default_head_dim = 0;
  // Per-head RMSNorm of Q and K (self_attn.q_norm / k_norm -> attention.{q,k}_layernorm).
  bool qk_norm = false;
  // Gemma's four norms a layer (sandwich_norm): post_attention_layernorm on the attention's output
  // (-> attention.post_layernorm), pre_feedforward_layernorm (-> FT's post_attention_layernorm, the
  // FFN's input norm) and post_feedforward_layernorm (-> mlp.post_layernorm).
  bool sandwich_norm = false;
  // The MLP's activation: its key, the key's default, the one nonlinearity ftx runs for the family
  // (gated) and how messages name it. Llama's hidden_act silu (SwiGLU); Gemma's hidden_activation.
  const char* act_key = "hidden_act";
  const char* act_default = "silu";
  Activation act = Activation::kSwiGlu;
  const char* act_says = "silu, i.e. SwiGLU";
  bool tied_default = false;  // tie_word_embeddings when absent
  int64_t default_bos = -1;   // bos_token_id when absent; -1: the eos id
  // The family's own keys, read after the shared ones (Gemma's norms, scale, softcaps, windows).
  void (*more)(HfCheckpoint& in, ConversionPlan& plan) = nullptr;
  // The rope scaling types the family computes.
  std::vector<RopeScalingType> rope_types = rope_scalings_read();
  // false: the family's default rope ignores partial_rotary_factor (Qwen3), so a value other than
  // 1 is refused rather than guessed.
  bool partial_rotary = true;
  // longrope's original_max_position_embeddings when the top level has none (RopeKeys).
  int64_t default_original_max_positions = 0;
  std::vector<std::pair<std::string, RopeScalingType>> rope_type_aliases;  // RopeKeys::type_aliases
  double default_theta = 10000.0;  // rope_theta when absent (Gemma 3: 1e6)
  std::string rope_layer_type;     // RopeKeys::layer_type (Gemma 3: full_attention)
};

// The keys every llama-like config has (the family's file adds its own); `head_dim` says how the
// family reads head_dim (null: must be hidden_size / num_attention_heads).
std::vector<KeyRule> llama_like_keys(const char* head_dim = nullptr);
// Qwen2's and Qwen3's window: none unless use_sliding_window is true, and then on the layers
// layer_types (5.x) or max_window_layers (4.x) say; Error unless every layer slides or none.
int64_t qwen_sliding_window(const json& j, int64_t layers, const std::string& origin);
// sliding_window: 0 when absent or null, else a positive integer (Error naming it otherwise).
int64_t sliding_window_key(const json& j, const std::string& origin);
// attention_bias (Qwen3, Gemma) puts biases on q, k, v and o but none on the MLP, a combination ftx
// lacks (has_bias is every bias, qkv_bias the QKV alone): no biases, and true refused naming
// `display`'s biases.
void no_attention_bias(const json& j, const std::string& origin, const std::string& display, ModelConfig& c);
HfFamily llama_like_family(const LlamaLike& spec);
// Qwen3's and Qwen3-MoE's rope keys in `k`: yarn beside linear and llama3, the whole head rotated,
// yarn's top-level original_max_position_embeddings (LlamaLike::rope_types: qwen3_rope_types()).
std::vector<KeyRule> qwen3_rope_keys(std::vector<KeyRule> k);
std::vector<RopeScalingType> qwen3_rope_types();

}  // namespace ftx::hf
