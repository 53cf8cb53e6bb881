// HuggingFace Gemma 2 (llama_like.cc has what it shares with Llama and Qwen, gemma_like.cc what it
// shares with Gemma 3): the MLP reads hidden_activation (gelu_pytorch_tanh: GeGLU with the tanh
// GELU), not hidden_act; head_dim its own key (default 256); four norms a layer (sandwich_norm), each scaling by 1 + γ
// (norm_unit_offset); embeddings × sqrt(hidden_size) in the weights' dtype; scores scaled by
// query_pre_attn_scalar^-1/2 and capped by attn_logit_softcapping, logits by
// final_logit_softcapping; sliding windows on the layers layer_types names (default: the even
// ones); tied embeddings by default.
#include <string>
#include <vector>

#include "lib/convert/hf/gemma_like.h"
#include "lib/convert/hf/llama_like.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const GemmaDefaults kGemma2{50.0, 30.0, 2};

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = overriding(
      join(llama_like_keys("size_per_head (absent: 256, Gemma2Config's default); hidden_size may differ from heads x head_dim"),
           join(gemma_keys({"layer_window: sliding_attention layers get sliding_window, full_attention 0 (absent: the "
                            "even layers slide)",
                            "attention_softcap (absent: 50; null: none)", "final_logit_softcap (absent: 30; null: none)"}),
                {{"cache_implementation", N, "4.x: the cache generate() makes (hybrid)"}})),
      {{"hidden_act", N, "unused: Gemma 2's MLP reads hidden_activation"},
       {"tie_word_embeddings", R, "tied_embeddings (absent: true)"},
       {"partial_rotary_factor", R, "1 only (Gemma 2 rotates the whole head; others refused)"}});
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) { no_attention_bias(j, origin, "Gemma 2", c); }

void more(HfCheckpoint& in, ConversionPlan& plan) { read_gemma(in, plan, kGemma2); }

HfFamily gemma2() {
  LlamaLike s = gemma_spec();
  s.family.model_type = "gemma2";
  s.family.order = 130;
  s.family.display = "Gemma 2";
  s.family.examples = "google/gemma-2-2b, gemma-2-9b and gemma-2-27b, and their -it fine-tunes";
  s.family.keys = keys;
  s.biases = biases;
  s.more = more;
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(gemma2);

}  // namespace ftx::hf
