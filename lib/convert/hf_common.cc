#include "lib/convert/hf_common.h"

#include "formats/error.h"
#include "formats/hf_index.h"
#include "formats/mapped_file.h"
#include "formats/safetensors.h"
#include "formats/torch_checkpoint.h"

namespace ftx::hf {

int64_t int_key(const json& j, const std::string& k, const std::string& origin) {
  auto it = j.find(k);
  if (it == j.end() || !it->is_number_integer()) throw Error(origin, "missing integer key '" + k + "'");
  return it->get<int64_t>();
}

int64_t int_key_any(const json& j, const std::vector<std::string>& keys, const std::string& origin) {
  for (auto& k : keys) {
    auto it = j.find(k);
    if (it != j.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  std::string names;
  for (auto& k : keys) names += (names.empty() ? "'" : " or '") + k + "'";
  throw Error(origin, "missing integer key " + names);
}

int64_t int_or(const json& j, const std::string& k, int64_t d) {
  auto it = j.find(k);
  return (it != j.end() && it->is_number_integer()) ? it->get<int64_t>() : d;
}

double num_or(const json& j, const std::string& k, double d) {
  auto it = j.find(k);
  return (it != j.end() && it->is_number()) ? it->get<double>() : d;
}

bool bool_or(const json& j, const std::string& k, bool d) {
  auto it = j.find(k);
  return (it != j.end() && it->is_boolean()) ? it->get<bool>() : d;
}

std::string str_or(const json& j, const std::string& k, const std::string& d) {
  auto it = j.find(k);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : d;
}

int64_t token_id_or(const json& j, const std::string& k, int64_t d, const std::string& origin,
                    std::vector<std::string>* notes) {
  auto it = j.find(k);
  if (it == j.end() || it->is_null()) return d;
  if (it->is_number_integer()) return it->get<int64_t>();
  FTX_CHECK(it->is_array() && !it->empty() && (*it)[0].is_number_integer(), origin,
            k + " = " + it->dump() + " is neither a token id nor a list of them");
  if (notes && it->size() > 1)
    notes->push_back(origin + ": " + k + " = " + it->dump() + ": end_id is the first; FT stops on one id only");
  return (*it)[0].get<int64_t>();
}

Activation activation_key(const json& j, const std::string& k, const std::string& d, const std::string& origin) {
  const std::string v = str_or(j, k, d);
  try {
    return activation_from_name(v);
  } catch (const Error& e) {
    throw Error(origin, k + " = '" + v + "': " + e.what());
  }
}

void refuse_common(const json& j, const std::string& origin) {
  auto pruned = j.find("pruned_heads");
  FTX_CHECK(pruned == j.end() || pruned->is_null() || pruned->empty(), origin,
            "pruned_heads = " + (pruned == j.end() ? std::string() : pruned->dump(-1).substr(0, 80)) +
                " is not supported (attention heads removed)");
  FTX_CHECK(!j.contains("quantization_config"), origin,
            "quantization_config is not supported (quantised weights; convert the unquantised checkpoint)");
  FTX_CHECK(!bool_or(j, "add_cross_attention", false), origin,
            "add_cross_attention true is not supported (cross-attention layers)");
}

std::vector<NamedTensor> load_weights(const std::string& in_path) {
  HfWeightFiles wf = hf_weight_files_at(in_path);
  std::vector<NamedTensor> all;
  if (wf.format == "safetensors") {
    if (!wf.index_path.empty()) return read_safetensors_sharded(wf.index_path);
    for (auto& f : wf.files) {
      auto t = read_safetensors(f);
      all.insert(all.end(), t.begin(), t.end());
    }
    return all;
  }
  for (auto& f : wf.files) {
    std::vector<NamedTensor> t;
    std::vector<NamedValue> others;
    flatten_value(load_torch_checkpoint(f), "", t, others);
    for (auto& nt : t) nt.tensor.storage.origin = f;
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

void add_tokenizer_files(const std::string& folder, ConversionPlan& plan) {
  // Every tokenizer file lib/tokenizer can load (GPT-2 BPE, tokenizer.json for BLOOM/NeoX, XGLM's
  // and other SentencePiece models) and the files that name special ids, so the FT folder carries
  // its own tokenizer.
  for (const char* tok : {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json", "sentencepiece.bpe.model", "tokenizer.model"}) {
    std::string p = folder + "/" + tok;
    if (!path_exists(p)) continue;
    plan.copy_files.emplace_back(tok, file_storage(MappedFile::open(p)));
  }
}

}  // namespace ftx::hf
