#include "lib/convert/hf/gemma_like.h"

#include <cmath>
#include <string>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;

// A softcap key: its default when absent, 0 (none) when null, else a positive number.
double softcap_key(const json& j, const std::string& k, double d, const std::string& origin) {
  auto it = j.find(k);
  if (it == j.end()) return d;
  if (it->is_null()) return 0.0;
  const double v = num_or(j, k, d, origin);
  FTX_CHECK(v > 0 && std::isfinite(v), origin, k + " = " + it->dump() + " is not a positive number (null: no softcap)");
  return v;
}

// layer_types (absent: the period's pattern) -> one window per layer: sliding_window on the
// sliding_attention layers, 0 on the full_attention ones.
std::vector<int64_t> layer_windows(const json& j, int64_t layers, int64_t period, const std::string& origin) {
  std::vector<bool> sliding(static_cast<size_t>(layers));
  auto lt = j.find("layer_types");
  if (lt == j.end() || lt->is_null()) {
    for (int64_t i = 0; i < layers; ++i) sliding[static_cast<size_t>(i)] = (i + 1) % period != 0;
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

}  // namespace

LlamaLike gemma_spec() {
  LlamaLike s;
  s.default_eos = 1;
  s.default_bos = 2;
  s.default_head_dim = 256;
  s.sandwich_norm = true;
  s.act_key = "hidden_activation";
  s.act_default = "gelu_pytorch_tanh";
  s.act = Activation::kGeGluTanh;
  s.act_says = "gelu_pytorch_tanh, i.e. GeGLU with the tanh GELU";
  s.tied_default = true;
  s.partial_rotary = false;
  return s;
}

std::vector<KeyRule> gemma_keys(const GemmaKeyNotes& n) {
  return {
      {"hidden_activation", R, "gelu_pytorch_tanh (absent too): GeGLU with the tanh GELU (others refused)"},
      {"attention_bias", R, "false: no biases; true (q/k/v and o biases) refused"},
      {"query_pre_attn_scalar", R, "attention_scale = query_pre_attn_scalar^-1/2 (absent: 256)"},
      {"sliding_window", R, "the window of the sliding_attention layers (absent: 4096; null with one refused)"},
      {"layer_types", R, n.layer_types},
      {"attn_logit_softcapping", R, n.attention_softcap},
      {"final_logit_softcapping", R, n.final_logit_softcap},
      {"use_bidirectional_attention", R, "null or false; true (attention that is not causal) refused"},
  };
}

void read_gemma(HfCheckpoint& in, ConversionPlan& plan, const GemmaDefaults& d) {
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
  c.attention_softcap = softcap_key(j, "attn_logit_softcapping", d.attention_softcap, origin);
  c.final_logit_softcap = softcap_key(j, "final_logit_softcapping", d.final_logit_softcap, origin);
  c.layer_window = layer_windows(j, c.num_layer, d.sliding_period, origin);
}

}  // namespace ftx::hf
