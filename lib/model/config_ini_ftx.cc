// ftx's own keys of config.ini (config_ini_keys.h): the facts FT leaves implicit. They are read
// last, so they win over what the FT or TensorRT-LLM keys implied.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/model/config_ini_keys.h"

namespace ftx::config_ini {

namespace {

PositionEmbedding position_from_name(const std::string& s, const std::string& origin) {
  std::string l = lower(s);
  if (l == "learned" || l == "learned_absolute") return PositionEmbedding::kLearned;
  if (l == "rope" || l == "rotary") return PositionEmbedding::kRotary;
  if (l == "alibi") return PositionEmbedding::kAlibi;
  if (l == "sinusoidal") return PositionEmbedding::kSinusoidal;
  if (l == "none") return PositionEmbedding::kNone;
  throw Error(origin, "unknown position_embedding_type '" + s +
                          "' (supported: learned, rope, alibi, sinusoidal, none)");
}

// "1,1.25,2.5" (check_config_ini has checked that every item is a number; layer_window's integers are
// far below 2^53, so exact as doubles).
std::vector<double> number_list(const std::string& text) {
  std::vector<double> v;
  size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    v.push_back(std::strtod(text.substr(at, comma - at).c_str(), nullptr));
    at = comma + 1;
  }
  return v;
}

// rotary_scaling_* (check_config_ini has checked their types and ranges).
void read_rope_scaling(const Reader& r, ModelConfig& c, const std::string& origin) {
  RopeScaling& s = c.rope_scaling;
  s.type = rope_scaling_from_name(lower(r.get_or("rotary_scaling_type", "none")), origin, "rotary_scaling_type",
                                  {RopeScalingType::kLinear, RopeScalingType::kLlama3, RopeScalingType::kYarn,
                                   RopeScalingType::kLongrope});
  if (s.type == RopeScalingType::kNone) return;
  s.factor = r.d_or("rotary_scaling_factor", 0.0);
  if (s.type == RopeScalingType::kLlama3) {
    s.low_freq_factor = r.d_or("rotary_scaling_low_freq_factor", 0.0);
    s.high_freq_factor = r.d_or("rotary_scaling_high_freq_factor", 0.0);
    s.original_max_position_embeddings = r.i_or("rotary_scaling_original_max_positions", 0);
  }
  if (s.type == RopeScalingType::kYarn) {
    s.original_max_position_embeddings = r.i_or("rotary_scaling_original_max_positions", 0);
    s.beta_fast = r.d_or("rotary_scaling_beta_fast", s.beta_fast);
    s.beta_slow = r.d_or("rotary_scaling_beta_slow", s.beta_slow);
    s.mscale = r.d_or("rotary_scaling_mscale", s.mscale);
    s.mscale_all_dim = r.d_or("rotary_scaling_mscale_all_dim", s.mscale_all_dim);
    s.truncate = r.b_or("rotary_scaling_truncate", s.truncate);
    if (r.has("rotary_scaling_attention_factor")) s.attention_factor = r.d_or("rotary_scaling_attention_factor", 1.0);
  }
  if (s.type == RopeScalingType::kLongrope) {
    s.original_max_position_embeddings = r.i_or("rotary_scaling_original_max_positions", 0);
    s.short_factor = number_list(r.get_or("rotary_scaling_short_factor", ""));
    s.long_factor = number_list(r.get_or("rotary_scaling_long_factor", ""));
    if (r.has("rotary_scaling_attention_factor")) s.attention_factor = r.d_or("rotary_scaling_attention_factor", 1.0);
  }
  check_rope_scaling(s, origin, c.rotary_dim);
}

}  // namespace

void read_ftx_keys(const Reader& r, ModelConfig& c) {
  const std::string& origin = r.origin();
  if (r.has("activation")) c.activation = activation_from_name(r.get("activation"));
  if (r.has("position_embedding_type"))
    c.position = position_from_name(r.get("position_embedding_type"), origin);
  c.position_offset = r.i_or("position_offset", c.position_offset);
  c.rotary_dim = r.i_or("rotary_dim", c.rotary_dim);
  if (c.position == PositionEmbedding::kRotary && c.rotary_dim == 0 && r.d_or("rotary_pct", 0.0) > 0)
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.size_per_head) * r.d_or("rotary_pct", 0.0) + 0.5);
  if (r.has("rotary_style")) {
    std::string s = lower(r.get("rotary_style"));
    if (s == "interleaved" || s == "gptj") c.rotary_style = RotaryStyle::kInterleaved;
    else if (s == "half_split" || s == "neox") c.rotary_style = RotaryStyle::kHalfSplit;
    else throw Error(origin, "rotary_style '" + s + "' is neither interleaved nor half_split");
  }
  c.rotary_base = r.d_or("rotary_base", c.rotary_base);
  read_rope_scaling(r, c, origin);
  c.qkv_bias = r.b_or("qkv_bias", c.qkv_bias);
  c.qk_norm = r.b_or("qk_norm", false);
  c.sliding_window = r.i_or("sliding_window", 0);
  c.sandwich_norm = r.b_or("sandwich_norm", false);
  // check_config_ini has checked the spelling and that int4 comes with its group size.
  const std::string weight_only = lower(r.get_or("weight_only_precision", "none"));
  c.weight_only_precision = weight_only == "int4"   ? WeightOnlyPrecision::kInt4
                            : weight_only == "int8" ? WeightOnlyPrecision::kInt8
                                                    : WeightOnlyPrecision::kNone;
  c.int4_group_size = r.i_or("int4_group_size", 0);
  c.layer_window.clear();
  if (r.has("layer_window"))  // "4,0": check_config_ini has checked the integers and their count
    for (double w : number_list(r.get("layer_window"))) c.layer_window.push_back(static_cast<int64_t>(w));
  c.rotary_base_local = r.d_or("rotary_base_local", 0.0);
  c.attention_scale = r.d_or("attention_scale", 0.0);
  c.attention_softcap = r.d_or("attention_softcap", 0.0);
  c.final_logit_softcap = r.d_or("final_logit_softcap", 0.0);
  c.parallel_residual = r.b_or("parallel_residual", c.parallel_residual);
  c.shared_input_norm = r.b_or("shared_input_norm", c.shared_input_norm);
  c.has_bias = r.b_or("has_bias", c.has_bias);
  c.tied_embeddings = r.b_or("tied_embeddings", c.tied_embeddings);
  c.has_lm_head_bias = r.b_or("has_lm_head_bias", c.has_lm_head_bias);
  c.embedding_scale = r.d_or("embedding_scale", c.embedding_scale);
  if (r.has("normalization")) {
    const std::string n = lower(r.get("normalization"));
    if (n == "rmsnorm") c.normalization = Normalization::kRmsNorm;
    else if (n == "layernorm") c.normalization = Normalization::kLayerNorm;
    else throw Error(origin, "normalization '" + n + "' is neither layernorm nor rmsnorm");
  }
  c.norm_unit_offset = r.b_or("norm_unit_offset", false);
  c.hidden_size = r.i_or("hidden_size", 0);
  c.kv_head_num = r.i_or("kv_head_num", c.attention == AttentionKind::kMultiQuery ? 1 : c.head_num);
  if (c.kv_head_num == 1 && c.head_num > 1) c.attention = AttentionKind::kMultiQuery;
  if (c.ft_variant == FtVariant::kGptBigCode && !r.has("kv_head_num") && r.b_or("multi_query_mode", false))
    c.kv_head_num = 1;
  if (c.position != PositionEmbedding::kLearned && c.position != PositionEmbedding::kSinusoidal &&
      c.ft_variant != FtVariant::kGptJ && c.ft_variant != FtVariant::kGptNeoX && !r.has("max_pos_seq_len"))
    c.max_pos_seq_len = 0;
}

}  // namespace ftx::config_ini
