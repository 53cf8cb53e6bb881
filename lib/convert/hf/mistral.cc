// HuggingFace Mistral (llama_like.cc has what it shares with Llama and Qwen2): no biases; its
// sliding_window is written as config.ini sliding_window (the engine runs it with a circular cache
// of that length, or refuses positions beyond it).
#include "lib/convert/hf/llama_like.h"

namespace ftx::hf {

namespace {

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k =
      join(llama_like_keys(), {{"sliding_window", KeyUse::kRead,
                                "sliding_window (null: none); see use_sliding_window for qwen2"}});
  return k;
}

HfFamily mistral() {
  LlamaLike s;
  s.family.model_type = "mistral";
  s.family.order = 90;
  s.family.display = "Mistral";
  s.family.examples = "Mistral 7B (v0.1 to v0.3) and its fine-tunes (Zephyr, OpenHermes); Mixtral is its own model_type, mixtral";
  s.family.keys = keys;
  s.default_eos = 2;
  s.biases = [](const json&, const std::string&, ModelConfig& c) {
    c.has_bias = false;
    c.qkv_bias = false;
  };
  s.sliding_window = [](const json& j, int64_t, const std::string& origin) { return sliding_window_key(j, origin); };
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(mistral);

}  // namespace ftx::hf
