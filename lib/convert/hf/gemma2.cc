// HuggingFace Gemma 2 (llama_like.cc has what it shares with Llama and Qwen): the MLP reads
// hidden_activation (gelu_pytorch_tanh: GeGLU with the tanh GELU), not hidden_act; head_dim its own
// key (default 256); four norms a layer (sandwich_norm), each scaling by 1 + γ
// (norm_unit_offset); embeddings × sqrt(hidden_size) in the weights' dtype; scores scaled by
// query_pre_attn_scalar^-1/2 and capped by attn_logit_softcapping, logits by
// final_logit_softcapping; sliding windows on the layers layer_types names (default: the even
// ones); tied embeddings by default.
#include <cmath>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = overriding(
      join(
        llama_like_keys("size_per_head (absent: 256, Gemma2Config's default); hidden_size may differ from heads x head_dim"),
        {
            {"hidden_activation", R, "gelu_pytorch_tanh (absent too): GeGLU with the tanh GELU (others refused)"},
            {"attention_bias", R, "false: no biases; true (q/k/v and o biases) refused"},
            {"query_pre_attn_scalar", R, "attention_scale = query_pre_attn_scalar^-1/2 (absent: 256)"},
            {"sliding_window", R, "the window of the sliding_attention layers (absent: 4096; null with one refused)"},
            {"layer_types", R,
             "layer_window: sliding_attention layers get sliding_window, full_attention 0 (absent: the even layers "
             "slide)"},
            {"attn_logit_softcapping", R, "attention_softcap (absent: 50; null: none)"},
            {"final_logit_softcapping", R, "final_logit_softcap (absent: 30; null: none)"},
            {"use_bidirectional_attention", R, "null or false; true (attention that is not causal) refused"},
            {"cache_implementation", N, "4.x: the cache generate() makes (hybrid)"},
        }),
      {{"hidden_act", N, "unused: Gemma 2's MLP reads hidden_activation"},
       {"tie_word_embeddings", R, "tied_embeddings (absent: true)"},
       {"partial_rotary_factor", R, "1 only (Gemma 2 rotates the whole head; others refused)"}});
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) { no_attention_bias(j, origin, "Gemma 2", c); }

// A softcap key: its default when absent, 0 (none) when null, else a positive number.
double softcap_key(const json& j, const std::string& k, double d, const std::string& origin) {
  auto it = j.find(k);
  if (it == j.end()) return d;
  if (it->is_null()) return 0.0;
  const double v = num_or(j, k, d, origin);
  FTX_CHECK(v > 0 && std::isfinite(v), origin, k + " = " + it->dump() + " is not a positive number (null: no softcap)");
  return v;
}

// layer_types (5.x; absent: Gemma2Config's default, layer i slides when i is even) -> one window per
// layer: sliding_window on the sliding_attention layers, 0 on the full_attention ones.
std::vector<int64_t> layer_windows(const json& j, int64_t layers, const std::string& origin) {
  std::vector<bool> sliding(static_cast<size_t>(layers));
  auto lt = j.find("layer_types");
  if (lt == j.end() || lt->is_null()) {
    for (int64_t i = 0; i < layers; ++i) sliding[static_cast<size_t>(i)] = i % 2 == 0;
  } else {
    FTX_CHECK(lt->is_array() && static_cast<int64_t>(lt->size()) == layers, origin,
              "layer_types = " + lt->dump().substr(0, 80) + " is not a list of num_hidden_layers = " +
                  std::to_string(layers) + " layer types");
    for (size_t i = 0; i < lt->size(); ++i) {
      const json& t = (*lt)[i];
      FTX_CHECK(t == "sliding_attention" || t == "full_attention", origin,
                "layer_types[" + std::to_string(i) + "] = " + t.dump() +
                    " is not supported (sliding_attention, full_attention)");
      sliding[i] = t == "sliding_attention";
    }
  }
  const int64_t w = j.contains("sliding_window") ? sliding_window_key(j, origin) : 4096;
  std::vector<int64_t> out;
  for (size_t i = 0; i < sliding.size(); ++i) {
    FTX_CHECK(!sliding[i] || w > 0, origin,
              "sliding_window = null with layer " + std::to_string(i) + " sliding_attention (layer_types) is not supported");
    out.push_back(sliding[i] ? w : 0);
  }
  return out;
}

void more(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  ModelConfig& c = plan.cfg;
  FTX_CHECK(!bool_or(j, "use_bidirectional_attention", false, origin), origin,
            "use_bidirectional_attention true is not supported (attention that is not causal)");
  c.norm_unit_offset = true;
  // transformers multiplies by sqrt(hidden_size) cast to the weights' dtype: the folder's here.
  c.embedding_scale = round_to_dtype(std::sqrt(static_cast<double>(c.hidden())), in.opt.dtype);
  const double qpas = num_or(j, "query_pre_attn_scalar", 256.0, origin);
  FTX_CHECK(qpas > 0 && std::isfinite(qpas), origin,
            "query_pre_attn_scalar = " + json(qpas).dump() + " is not a positive number");
  // qpas ** -0.5 as Python computes it; the engine's own 1/sqrt(head_dim) when they agree.
  c.attention_scale = qpas == static_cast<double>(c.size_per_head) ? 0.0 : std::pow(qpas, -0.5);
  c.attention_softcap = softcap_key(j, "attn_logit_softcapping", 50.0, origin);
  c.final_logit_softcap = softcap_key(j, "final_logit_softcapping", 30.0, origin);
  c.layer_window = layer_windows(j, c.num_layer, origin);
}

HfFamily gemma2() {
  LlamaLike s;
  s.model_type = "gemma2";
  s.order = 130;
  s.display = "Gemma 2";
  s.examples = "google/gemma-2-2b, gemma-2-9b and gemma-2-27b, and their -it fine-tunes";
  s.keys = keys;
  s.default_eos = 1;
  s.default_bos = 2;
  s.biases = biases;
  s.default_head_dim = 256;
  s.sandwich_norm = true;
  s.act_key = "hidden_activation";
  s.act_default = "gelu_pytorch_tanh";
  s.act = Activation::kGeGluTanh;
  s.act_says = "gelu_pytorch_tanh, i.e. GeGLU with the tanh GELU";
  s.tied_default = true;
  s.partial_rotary = false;
  s.more = more;
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(gemma2);

}  // namespace ftx::hf
