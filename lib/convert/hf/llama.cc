// HuggingFace Llama (llama_like.cc has what it shares with Mistral and Qwen2): all linear biases
// or none (attention_bias with mlp_bias), no sliding window.
#include "formats/error.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = join(
      llama_like_keys(),
      {
          {"attention_bias", KeyUse::kRead,
           "q/k/v/o biases: false (the default) none; true with mlp_bias true: has_bias; true alone refused"},
          {"mlp_bias", KeyUse::kRead, "gate/up/down biases: true refused unless attention_bias is true too"},
          {"pretraining_tp", KeyUse::kNoEffect, "splits the same products into slices"},
      });
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) {
  const bool attn_bias = bool_or(j, "attention_bias", false, origin), mlp_bias = bool_or(j, "mlp_bias", false, origin);
  FTX_CHECK(attn_bias == mlp_bias, origin,
            std::string("attention_bias ") + (attn_bias ? "true" : "false") + " with mlp_bias " +
                (mlp_bias ? "true" : "false") + " is not supported (FT's layout has all linear biases or none)");
  c.has_bias = attn_bias;
}

HfFamily llama() {
  LlamaLike s;
  s.family.model_type = "llama";
  s.family.order = 80;
  s.family.display = "Llama";
  s.family.examples = "Llama 2, Llama 3, 3.1 and 3.2, Code Llama, TinyLlama, Vicuna, Yi, DeepSeek LLM (v1), SmolLM";
  s.family.keys = keys;
  s.default_eos = 2;
  s.biases = biases;
  s.sliding_window = [](const json&, int64_t, const std::string&) -> int64_t { return 0; };
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(llama);

}  // namespace ftx::hf
