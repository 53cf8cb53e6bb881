#pragma once
// config.json keys that transformers 4.x and 5.x write in different places, read from wherever
// they are, and every key checked against what ftx knows of the architecture (hf_config_keys.cc).
//
// Rotary settings: transformers 4.x writes them at the top level (rope_theta, partial_rotary_factor,
// rope_scaling {type | rope_type, factor, ...}; GPT-NeoX also rotary_emb_base, rotary_pct);
// transformers 5.x only in rope_parameters {rope_type, rope_theta, partial_rotary_factor, factor,
// low_freq_factor, ...}. A value given in several places must agree there, else it is refused.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/model/rope_scaling.h"

namespace ftx::hf {

using json = nlohmann::json;

struct RopeKeys {
  std::vector<std::string> theta_aliases;    // older top-level names of rope_theta (rotary_emb_base)
  std::vector<std::string> partial_aliases;  // older top-level names of partial_rotary_factor (rotary_pct)
  double default_theta = 10000.0;
  double default_partial = 1.0;
  std::vector<RopeScalingType> accepted = rope_scalings_read();  // the scaling types the family computes
  // max_position_embeddings: yarn's original_max_position_embeddings when absent, and yarn's and
  // longrope's factor (max / original) when that is absent (transformers' _compute_<type>_parameters).
  int64_t max_positions = 0;
  // longrope: the top-level original_max_position_embeddings when config.json has none (Phi3Config's
  // field default, 4096; transformers puts it over rope_parameters'); 0: no default.
  int64_t default_original_max_positions = 0;
  // Older names of a type the family computes, read as that type (Phi3Config renames su and yarn
  // to longrope).
  std::vector<std::pair<std::string, RopeScalingType>> type_aliases;
  // When rope_parameters holds one set per layer type (transformers 5 for models that mix sliding
  // and full attention layers), the set of this type is read (Gemma 3's full_attention); empty:
  // every set must be the same.
  std::string layer_type;
};

struct HfRope {
  double theta = 10000.0;
  double partial_factor = 1.0;  // rotary dims = int(head_dim · partial_factor)
  std::string partial_where;    // the key it was read from ("" for the default)
  RopeScaling scaling;
};

// Error(origin, ...) naming the key and its value for a scaling type ftx does not compute, a
// rope_parameters key it does not know, or two places that disagree.
HfRope read_rope(const json& config, const std::string& origin, const RopeKeys& keys);

// int(head_size · partial_factor), Python's truncation as transformers and FT take it; Error(origin,
// ...) naming partial_rotary_factor (or the key it came from) when that is not an even number > 0.
int64_t rotary_dims(const HfRope& rope, int64_t head_size, const std::string& origin);

// How convert-hf treats one config.json key of an architecture.
enum class KeyUse {
  kRead,      // changes the model: read (and refused by name and value where ftx lacks it)
  kNoEffect,  // training, generation defaults, bookkeeping: not part of the model's math
};
struct KeyRule {
  const char* key;
  KeyUse use;
  const char* note;  // for kRead: what it becomes or which values are refused; kNoEffect: why
};

// The keys of transformers' configuration class for `model_type` (4.x and 5.x names; the family's
// table, lib/convert/hf/<family>.cc, empty for a type no family has), and the keys every
// PretrainedConfig may carry (hf_config_keys.cc). The man page's tables are these lists.
const std::vector<KeyRule>& architecture_keys(const std::string& model_type);
const std::vector<KeyRule>& common_keys();

// The keys of `config` that neither list names, in file order: ftx cannot tell whether they change
// the model, so convert-hf warns about them (it converts what it knows how to read).
std::vector<std::string> unknown_keys(const json& config, const std::string& model_type);

}  // namespace ftx::hf
