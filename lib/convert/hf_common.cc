#include "lib/convert/hf_common.h"

#include "formats/error.h"
#include "formats/hf_index.h"
#include "formats/mapped_file.h"
#include "formats/safetensors.h"
#include "formats/torch_checkpoint.h"
#include "lib/model/model_config.h"

namespace ftx::hf {

namespace {

// The key's value, or nullptr when it is absent or null.
const json* present(const json& j, const std::string& k) {
  auto it = j.find(k);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const std::string& k, const json& v, const char* what, const std::string& origin) {
  throw Error(origin, k + " = " + v.dump() + " is not " + what);
}

int64_t integer(const std::string& k, const json& v, const std::string& origin) {
  if (!v.is_number_integer()) wrong_type(k, v, "an integer", origin);
  return v.get<int64_t>();
}

// An integer in [lo, kMaxModelDim] (lo 0 or 1).
int64_t bounded(const std::string& k, const json& v, int64_t lo, const std::string& origin) {
  const int64_t n = integer(k, v, origin);
  FTX_CHECK(n >= lo, origin, k + " = " + v.dump() + (lo > 0 ? " is not a positive integer" : " is negative"));
  FTX_CHECK(n <= kMaxModelDim, origin,
            k + " = " + v.dump() + " is implausibly large (ftx's limit is " + std::to_string(kMaxModelDim) + ")");
  return n;
}

}  // namespace

int64_t int_or(const json& j, const std::string& k, int64_t d, const std::string& origin) {
  const json* v = present(j, k);
  return v ? integer(k, *v, origin) : d;
}

double num_or(const json& j, const std::string& k, double d, const std::string& origin) {
  const json* v = present(j, k);
  if (!v) return d;
  if (!v->is_number()) wrong_type(k, *v, "a number", origin);
  return v->get<double>();
}

bool bool_or(const json& j, const std::string& k, bool d, const std::string& origin) {
  const json* v = present(j, k);
  if (!v) return d;
  if (!v->is_boolean()) wrong_type(k, *v, "a boolean (true or false)", origin);
  return v->get<bool>();
}

std::string str_or(const json& j, const std::string& k, const std::string& d, const std::string& origin) {
  const json* v = present(j, k);
  if (!v) return d;
  if (!v->is_string()) wrong_type(k, *v, "a string", origin);
  return v->get<std::string>();
}

int64_t dim_key(const json& j, const std::string& k, const std::string& origin) {
  auto it = j.find(k);
  if (it == j.end()) throw Error(origin, "missing integer key '" + k + "'");
  return bounded(k, *it, 1, origin);
}

int64_t dim_or(const json& j, const std::string& k, int64_t d, const std::string& origin) {
  const json* v = present(j, k);
  return v ? bounded(k, *v, 1, origin) : d;
}

int64_t dim_key_any(const json& j, const std::vector<std::string>& keys, const std::string& origin) {
  for (auto& k : keys)
    if (j.contains(k)) return dim_key(j, k, origin);
  std::string names;
  for (auto& k : keys) names += (names.empty() ? "'" : " or '") + k + "'";
  throw Error(origin, "missing integer key " + names);
}

int64_t positions_or(const json& j, const std::string& k, const std::string& origin) {
  const json* v = present(j, k);
  return v ? bounded(k, *v, 0, origin) : 0;
}

double eps_or(const json& j, const std::string& k, double d, const std::string& origin) {
  const json* v = present(j, k);
  const double e = num_or(j, k, d, origin);
  FTX_CHECK(e > 0 && e <= 1, origin,
            k + " = " + v->dump() + " is not in (0, 1]" +
                (e == 0 ? " (the norm divides by sqrt(variance + eps): with eps 0 a row whose variance is 0, "
                          "e.g. all zeros, becomes NaN)"
                        : ""));
  return e;
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
  const std::string v = str_or(j, k, d, origin);
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
  FTX_CHECK(!bool_or(j, "add_cross_attention", false, origin), origin,
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
