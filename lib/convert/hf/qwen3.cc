// HuggingFace Qwen3 (dense; llama_like.cc has what it shares with Llama, Mistral and Qwen2):
// head_dim is its own key (default 128, not hidden_size / heads, so hidden_size may differ from
// heads x head_dim); per-head RMSNorm of Q and K after the projections (q_norm / k_norm ->
// attention.{q,k}_layernorm, qk_norm = 1); yarn rope scaling; no biases by default.
#include <string>
#include <utility>

#include "formats/error.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = join(
      qwen3_rope_keys(llama_like_keys(
          "size_per_head (absent: 128, Qwen3Config's default); hidden_size may differ from heads x head_dim")),
      {
          {"sliding_window", R, "sliding_window (null: none); see use_sliding_window"},
          {"use_sliding_window", R, "false: no window; true: window on the layers layer_types says"},
          {"max_window_layers", R, "4.x: layers from this index on slide; some sliding, some not is refused"},
          {"layer_types", R, "5.x: full_attention / sliding_attention per layer; a mix is refused"},
          {"attention_bias", R, "false: no biases; true (q/k/v and o biases) refused"},
      });
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) { no_attention_bias(j, origin, "Qwen3", c); }

HfFamily qwen3() {
  LlamaLike s;
  s.family.model_type = "qwen3";
  s.family.order = 110;
  s.family.display = "Qwen3";
  s.family.examples = "Qwen3 dense; Qwen3-MoE is its own model_type, qwen3_moe";
  s.family.keys = keys;
  s.default_eos = 151643;
  s.biases = biases;
  s.sliding_window = qwen_sliding_window;
  s.default_head_dim = 128;
  s.qk_norm = true;
  s.rope_types = qwen3_rope_types();
  s.partial_rotary = false;
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(qwen3);

}  // namespace ftx::hf
