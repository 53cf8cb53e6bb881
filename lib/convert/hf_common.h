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

// A token id key (bos_token_id, eos_token_id): an integer, or the first of a list of them (Llama
// 3.1's eos_token_id; the others are noted in `notes`); `d` when absent or null.
int64_t token_id_or(const json& j, const std::string& k, int64_t d, const std::string& origin,
                    std::vector<std::string>* notes = nullptr);
// The activation named by key `k` (default `d`); Error(origin, "k = 'v': unknown activation ...").
Activation activation_key(const json& j, const std::string& k, const std::string& d, const std::string& origin);
// Keys every architecture refuses: pruned_heads not empty, quantization_config, add_cross_attention true.
void refuse_common(const json& j, const std::string& origin);

// Every tensor of the model, names as stored (prefixes included): `in_path` is the model folder
// (transformers' order of preference among its weight files) or the one weight file to convert.
std::vector<NamedTensor> load_weights(const std::string& in_path);

// vocab.json, merges.txt, tokenizer.json, tokenizer_config.json when present, copied as they are.
void add_tokenizer_files(const std::string& folder, ConversionPlan& plan);

}  // namespace ftx::hf
