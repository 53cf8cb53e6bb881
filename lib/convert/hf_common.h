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

// Typed keys of config.json: the default when absent or null. Present with another JSON type (the
// string "64", the float 64.0 where an integer belongs, the string "false" where a boolean does):
// Error(origin, "k = \"64\" is not an integer"), never the default (transformers would pass such a
// value on, or read "false" as true).
int64_t int_or(const json& j, const std::string& k, int64_t d, const std::string& origin);
double num_or(const json& j, const std::string& k, double d, const std::string& origin);
bool bool_or(const json& j, const std::string& k, bool d, const std::string& origin);
std::string str_or(const json& j, const std::string& k, const std::string& d, const std::string& origin);

// A size (hidden size, heads, layers, FFN size, vocabulary, position table rows): an integer in
// [1, kMaxModelDim], else Error(origin, "num_hidden_layers = -1 is not a positive integer"), in
// config.json's key, before it becomes FT's. dim_key: absent is "missing integer key 'k'";
// dim_or: `d` when absent or null.
int64_t dim_key(const json& j, const std::string& k, const std::string& origin);
int64_t dim_or(const json& j, const std::string& k, int64_t d, const std::string& origin);
// The first of `keys` present (HF renamed keys across versions: n_embed/hidden_size), as dim_key.
int64_t dim_key_any(const json& j, const std::vector<std::string>& keys, const std::string& origin);
// A position count that may be 0 (max_position_embeddings of a rotary model: recorded, not a
// limit): an integer in [0, kMaxModelDim]; 0 when absent or null.
int64_t positions_or(const json& j, const std::string& k, const std::string& origin);
// A norm's epsilon in (0, 1] (the range config.ini takes); `d` when absent or null. 0 is refused:
// the norms divide by sqrt(variance + eps), and a row whose variance is 0 would become NaN.
double eps_or(const json& j, const std::string& k, double d, const std::string& origin);

// A token id key (bos_token_id, eos_token_id): an integer, or the first of a list of them (Llama
// 3.1's eos_token_id; the others are noted in `notes`); `d` when absent or null.
int64_t token_id_or(const json& j, const std::string& k, int64_t d, const std::string& origin,
                    std::vector<std::string>* notes = nullptr);
// The activation named by key `k` (default `d`); Error(origin, "k = 'v': unknown activation ...").
Activation activation_key(const json& j, const std::string& k, const std::string& d, const std::string& origin);
// Keys every architecture refuses: pruned_heads not empty, add_cross_attention true (quantization_config
// is the quantised readers' to judge: lib/convert/quantized/).
void refuse_common(const json& j, const std::string& origin);

// Every tensor of the model, names as stored (prefixes included): `in_path` is the model folder
// (transformers' order of preference among its weight files) or the one weight file to convert.
std::vector<NamedTensor> load_weights(const std::string& in_path);

// vocab.json, merges.txt, tokenizer.json, tokenizer_config.json when present, copied as they are.
void add_tokenizer_files(const std::string& folder, ConversionPlan& plan);

}  // namespace ftx::hf
