// HuggingFace Qwen2 (llama_like.cc has what it shares with Llama and Mistral): q/k/v biases only
// (qkv_bias = 1); a sliding window only where use_sliding_window is true, and then on every layer.
#include "formats/error.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = join(
      llama_like_keys(),
      {
          {"sliding_window", R, "sliding_window (null: none); see use_sliding_window for qwen2"},
          {"use_sliding_window", R, "false: no window; true: window on the layers layer_types says"},
          {"max_window_layers", R, "4.x: layers from this index on slide; some sliding, some not is refused"},
          {"layer_types", R, "5.x: full_attention / sliding_attention per layer; a mix is refused"},
          {"attention_bias", R, "Qwen2's q/k/v biases (o has none); false refused"},
      });
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) {
  c.has_bias = false;
  c.qkv_bias = true;
  FTX_CHECK(bool_or(j, "attention_bias", true, origin), origin, "attention_bias false is not supported (Qwen2 has q/k/v biases)");
}

HfFamily qwen2() {
  LlamaLike s;
  s.family.model_type = "qwen2";
  s.family.order = 100;
  s.family.display = "Qwen2";
  s.family.examples = "Qwen1.5 and Qwen2/2.5 dense; Qwen2-MoE is its own model_type, qwen2_moe";
  s.family.keys = keys;
  s.default_eos = 151643;
  s.biases = biases;
  s.sliding_window = qwen_sliding_window;
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(qwen2);

}  // namespace ftx::hf
