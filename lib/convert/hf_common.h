#pragma once
// Pieces every HuggingFace adapter shares: config.json access with typed defaults, loading the
// state dict (pytorch_model.bin, *.safetensors, sharded), copying the tokenizer files.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/value.h"
#include "lib/convert/conversion.h"

namespace ftx::hf {

using json = nlohmann::json;

// Error(origin, "missing integer key 'k'") when absent or not an integer.
int64_t int_key(const json& j, const std::string& k, const std::string& origin);
// The first of `keys` present as an integer (HF renamed keys across versions: n_embed/hidden_size).
int64_t int_key_any(const json& j, const std::vector<std::string>& keys, const std::string& origin);
int64_t int_or(const json& j, const std::string& k, int64_t d);
double num_or(const json& j, const std::string& k, double d);
bool bool_or(const json& j, const std::string& k, bool d);
std::string str_or(const json& j, const std::string& k, const std::string& d);

// Every tensor of the model, names as stored (prefixes included): `in_path` is the model folder
// (transformers' order of preference among its weight files) or the one weight file to convert.
std::vector<NamedTensor> load_weights(const std::string& in_path);

// vocab.json, merges.txt, tokenizer.json, tokenizer_config.json when present, copied as they are.
void add_tokenizer_files(const std::string& folder, ConversionPlan& plan);

}  // namespace ftx::hf
