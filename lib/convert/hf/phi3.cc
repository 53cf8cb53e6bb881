// HuggingFace Phi-3 and Phi-4-mini (model_type phi3; llama_like.cc has what they share with Llama):
// q, k and v stored fused as self_attn.qkv_proj ([Q heads | K heads | V heads] rows) and gate and up
// as mlp.gate_up_proj ([gate | up] rows), taken apart here into the tensors Llama stores, so the
// same layout table, QKV fusion and tensor-parallel split serve both; partial rotary (Phi-4-mini
// rotates 3/4 of each head); longrope. transformers switches longrope from short_factor to
// long_factor once a sequence passes original_max_position_embeddings; ftx computes the short one
// and refuses longer requests by name (rope_scaling.h).
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/hf/llama_like.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = overriding(
      join(
        llama_like_keys(),
        {
            {"original_max_position_embeddings", R,
             "longrope's original length (absent: 4096, Phi3Config's); over rope_parameters', which must agree; requests "
             "longer than it are refused"},
            {"sliding_window", R, "sliding_window on every layer (null: none)"},
            {"resid_pdrop", N, kDropout},
            {"embd_pdrop", N, kDropout},
        }),
      {{"rope_parameters", R,
        "5.x: rope_type default or longrope (su and yarn, 4.x names, read as longrope, as Phi3Config does; others "
        "refused, as Phi3Config refuses them), rope_theta, partial_rotary_factor, short_factor, long_factor (rotary dims / "
        "2 numbers each), factor (absent: max_position_embeddings / original_max_position_embeddings), attention_factor "
        "(absent: derived), original_max_position_embeddings; any other field refused"}});
  return k;
}

// Rows [at, at + n) of a fused source, under the name the unfused tensor has in Llama.
Source part(const Source& s, const std::string& name, int64_t at, int64_t n) {
  const std::string origin = s.origin + " rows " + std::to_string(at) + ":" + std::to_string(at + n);
  return Source{name, origin, row_range(s.t, at, n, s.origin), s.stored};
}

bool ends_with(const std::string& s, const std::string& tail, std::string& head) {
  if (s.size() < tail.size() || s.compare(s.size() - tail.size(), tail.size(), tail) != 0) return false;
  head = s.substr(0, s.size() - tail.size());
  return true;
}

std::vector<Source> unfuse(HfCheckpoint& in, const ModelConfig& c, const Source& s) {
  std::string layer;
  const int64_t rows = s.t.shape.empty() ? 0 : s.t.shape[0];
  if (ends_with(s.name, "self_attn.qkv_proj.weight", layer)) {
    // c.kv_head_num may count the copies made for more ranks than K/V heads; the checkpoint has the source's.
    const int64_t d = c.size_per_head, q = c.head_num * d;
    const int64_t kv = int_or(in.config, "num_key_value_heads", c.head_num, in.cfg_path) * d;
    FTX_CHECK(s.t.shape.size() == 2 && rows == q + 2 * kv, s.origin,
              "qkv_proj has shape " + shape_to_string(s.t.shape) + ", not [" + std::to_string(q + 2 * kv) +
                  ", hidden] (num_attention_heads + 2 x num_key_value_heads rows of head_dim)");
    return {part(s, layer + "self_attn.q_proj.weight", 0, q), part(s, layer + "self_attn.k_proj.weight", q, kv),
            part(s, layer + "self_attn.v_proj.weight", q + kv, kv)};
  }
  if (ends_with(s.name, "mlp.gate_up_proj.weight", layer)) {
    const int64_t I = c.inter_size;
    FTX_CHECK(s.t.shape.size() == 2 && rows == 2 * I, s.origin,
              "gate_up_proj has shape " + shape_to_string(s.t.shape) + ", not [2 x intermediate_size " +
                  std::to_string(I) + ", hidden]");
    return {part(s, layer + "mlp.gate_proj.weight", 0, I), part(s, layer + "mlp.up_proj.weight", I, I)};
  }
  return {s};
}

HfFamily phi3() {
  LlamaLike s;
  s.family.model_type = "phi3";
  s.family.order = 120;
  s.family.display = "Phi-3";
  s.family.examples = "Phi-3 (mini, small, medium; 4k and 128k) and Phi-4-mini; not Phi-3.5-MoE or Phi-3-vision";
  s.family.keys = keys;
  s.default_eos = 32000;
  s.biases = [](const json&, const std::string&, ModelConfig& c) {
    c.has_bias = false;
    c.qkv_bias = false;
  };
  s.sliding_window = [](const json& j, int64_t, const std::string& origin) { return sliding_window_key(j, origin); };
  s.rope_types = {RopeScalingType::kLongrope};
  s.default_original_max_positions = 4096;
  // Phi-3's first 128k checkpoints say "su"; Phi3Config reads su and yarn as longrope.
  s.rope_type_aliases = {{"su", RopeScalingType::kLongrope}, {"yarn", RopeScalingType::kLongrope}};
  HfFamily f = llama_like_family(s);
  f.unfuse = unfuse;
  return f;
}

}  // namespace

FTX_HF_FAMILY(phi3);

}  // namespace ftx::hf
