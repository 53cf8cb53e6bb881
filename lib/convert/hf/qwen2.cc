// HuggingFace Qwen2 (llama_like.cc has what it shares with Llama and Mistral): q/k/v biases only
// (qkv_bias = 1); a sliding window only where use_sliding_window is true, and then on every layer.
#include <algorithm>

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

// Qwen2 slides only where use_sliding_window is true, on the layers layer_types (5.x) or
// max_window_layers (4.x) say.
int64_t sliding_window(const json& j, int64_t layers, const std::string& origin) {
  const int64_t w = sliding_window_key(j, origin);
  if (w == 0 || !bool_or(j, "use_sliding_window", false, origin)) return 0;
  int64_t sliding = 0;
  auto lt = j.find("layer_types");
  if (lt != j.end() && lt->is_array()) {
    for (auto& t : *lt) sliding += t == "sliding_attention";
  } else {
    const int64_t from = int_or(j, "max_window_layers", 0, origin);
    sliding = from >= layers ? 0 : layers - std::max<int64_t>(from, 0);
  }
  if (sliding == 0) return 0;
  FTX_CHECK(sliding == layers, origin,
            "use_sliding_window true with " + std::to_string(sliding) + " of " + std::to_string(layers) +
                " layers sliding (layer_types / max_window_layers) is not supported: ftx's window is the same for every layer");
  return w;
}

HfFamily qwen2() {
  LlamaLike s;
  s.model_type = "qwen2";
  s.order = 100;
  s.display = "Qwen2";
  s.examples = "Qwen1.5 and Qwen2/2.5 dense (not Qwen2-MoE)";
  s.keys = keys;
  s.default_eos = 151643;
  s.biases = biases;
  s.sliding_window = sliding_window;
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(qwen2);

}  // namespace ftx::hf
