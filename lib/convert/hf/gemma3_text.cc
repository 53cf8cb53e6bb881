// HuggingFace Gemma 3's text model (gemma3_text; llama_like.cc and gemma_like.cc hold what it
// shares with Llama and Gemma 2): Gemma 2's block plus per-head q_norm / k_norm (1 + γ too); no
// softcaps unless given; without layer_types, layer i slides unless (i + 1) % sliding_window_pattern
// == 0 (absent: 6); and two rotary sets: the full layers' (rope_parameters.full_attention, or 4.x's
// rope_theta and rope_scaling; absent: base 1e6; linear scaling for the 4B and larger) and the
// sliding layers' (rope_parameters.sliding_attention, or 4.x's rope_local_base_freq; absent: base
// 10000, never scaled) -> rotary_base_local.
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/convert/hf/gemma_like.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

constexpr double kLocalBase = 10000.0;  // Gemma3TextConfig's default_theta["local"]

GemmaDefaults defaults(int64_t period) { return {0.0, 0.0, period}; }

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = overriding(
      join(llama_like_keys("size_per_head (absent: 256, Gemma3TextConfig's default); hidden_size may differ from heads x head_dim"),
           join(gemma_keys({"layer_window: sliding_attention layers get sliding_window, full_attention 0 (absent: "
                            "layer i slides unless (i + 1) % sliding_window_pattern == 0)",
                            "attention_softcap (absent or null: none)", "final_logit_softcap (absent or null: none)"}),
                {
                    {"sliding_window_pattern", R, "4.x: without layer_types, layer i slides unless (i + 1) % pattern == 0 (absent: 6)"},
                    {"_sliding_window_pattern", N, "5.x saves it; transformers reads sliding_window_pattern and layer_types"},
                    {"rope_local_base_freq", R,
                     "4.x: rotary_base_local, the sliding layers' base (absent: 10000; must agree with "
                     "rope_parameters.sliding_attention)"},
                    {"cache_implementation", N, "4.x: the cache generate() makes (hybrid)"},
                })),
      {{"hidden_act", N, "unused: Gemma 3's MLP reads hidden_activation"},
       {"tie_word_embeddings", R, "tied_embeddings (absent: true)"},
       {"partial_rotary_factor", R, "1 only (Gemma 3 rotates the whole head; others refused)"},
       {"rope_parameters", R,
        "5.x: one set per layer type: full_attention -> rotary_base and the scaling (rope_type default or linear, "
        "rope_theta, factor; others refused), sliding_attention -> rotary_base_local (rope_type default and "
        "rope_theta only); any other set or field refused"},
       {"rope_scaling", R, "4.x: the full layers' scaling (linear; others refused)"},
       {"rope_theta", R, "4.x: rotary_base, the full layers' base (absent: 1000000)"}});
  return k;
}

void biases(const json& j, const std::string& origin, ModelConfig& c) { no_attention_bias(j, origin, "Gemma 3", c); }

// The sliding layers' base: rope_parameters.sliding_attention's rope_theta (5.x, unscaled) and
// 4.x's rope_local_base_freq, which must agree when both are given.
double local_base(const json& j, const std::string& origin) {
  double base = kLocalBase;
  std::string where;
  auto top = j.find("rope_local_base_freq");
  if (top != j.end() && !top->is_null()) {
    base = num_or(j, "rope_local_base_freq", kLocalBase, origin);
    where = "rope_local_base_freq";
  }
  auto rp = j.find("rope_parameters");
  if (rp == j.end() || rp->is_null()) return base;
  // read_rope has read full_attention; a set that is not per layer type is not Gemma 3's.
  FTX_CHECK(rp->is_object() && rp->contains("full_attention"), origin,
            "rope_parameters = " + rp->dump().substr(0, 120) +
                " is not one set per layer type (Gemma 3: full_attention and sliding_attention)");
  for (auto& [type, set] : rp->items())
    FTX_CHECK(type == "full_attention" || type == "sliding_attention", origin,
              "rope_parameters." + type + " is not a layer type of Gemma 3 (full_attention, sliding_attention)");
  auto s = rp->find("sliding_attention");
  if (s == rp->end()) return base;
  // The type first, so that a scaling is refused by its name, not by a field that comes with it.
  auto type = s->find("rope_type");
  FTX_CHECK(type == s->end() || *type == "default", origin,
            "rope_parameters.sliding_attention.rope_type = " + type->dump() +
                " is not supported (Gemma 3's sliding layers rotate unscaled: default)");
  for (auto& [k, v] : s->items()) {
    const std::string key = "rope_parameters.sliding_attention." + k;
    if (k == "rope_type") {
      continue;
    } else if (k == "rope_theta") {
      FTX_CHECK(v.is_number() && v.get<double>() > 0, origin, key + " = " + v.dump() + " is not a positive number");
      FTX_CHECK(where.empty() || v.get<double>() == base, origin,
                where + " = " + json(base).dump() + " and " + key + " = " + v.dump() +
                    " disagree (which one transformers uses depends on its version); make them equal");
      base = v.get<double>();
    } else {
      FTX_CHECK(false, origin, key + " = " + v.dump() + " is not supported (Gemma 3's sliding layers: rope_type default and rope_theta only)");
    }
  }
  return base;
}

void more(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  const int64_t period = int_or(j, "sliding_window_pattern", 6, origin);
  FTX_CHECK(period > 0, origin, "sliding_window_pattern = " + std::to_string(period) + " is not a positive integer");
  read_gemma(in, plan, defaults(period));
  ModelConfig& c = plan.cfg;
  const double local = local_base(j, origin);
  for (int64_t w : c.layer_window)
    if (w > 0) c.rotary_base_local = local;  // only a model with a sliding layer has a local base
}

HfFamily gemma3_text() {
  LlamaLike s = gemma_spec();
  s.family.model_type = "gemma3_text";
  s.family.order = 140;
  s.family.display = "Gemma 3 text";
  s.family.examples = "google/gemma-3-1b-pt and -it, and the text model of the larger Gemma 3 (saved as gemma3_text)";
  s.family.keys = keys;
  s.biases = biases;
  s.qk_norm = true;
  s.rope_types = {RopeScalingType::kLinear};
  s.default_theta = 1e6;
  s.rope_layer_type = "full_attention";
  s.more = more;
  return llama_like_family(s);
}

}  // namespace

FTX_HF_FAMILY(gemma3_text);

}  // namespace ftx::hf
