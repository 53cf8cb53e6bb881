#include "lib/tokenizer/tokenizer_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/tokenizer_files.h"

namespace ftx {
namespace {

namespace fs = std::filesystem;

std::optional<bool> flag(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

// A boolean member, false when absent or not a boolean (a null as transformers writes for unset).
bool member_true(const nlohmann::json& v, const char* key) {
  auto it = v.find(key);
  return it != v.end() && it->is_boolean() && it->get<bool>();
}

// "<s>" or {"content": "<s>", "lstrip": ..., ...} (transformers' AddedToken, serialized with or
// without "__type"); nullopt for anything else or an empty content.
std::optional<AddedToken> token_of(const nlohmann::json& v) {
  AddedToken t;
  if (v.is_string()) {
    t.content = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    t.content = v["content"].get<std::string>();
    t.lstrip = member_true(v, "lstrip");
    t.rstrip = member_true(v, "rstrip");
    t.single_word = member_true(v, "single_word");
  } else {
    return std::nullopt;
  }
  t.special = true;
  if (t.content.empty()) return std::nullopt;
  return t;
}

void read_added_tokens(const nlohmann::json& decoder, const std::string& path, TokenizerConfig* out) {
  if (!decoder.is_object()) throw Error(path, "added_tokens_decoder is " + decoder.dump() + ", expected an object");
  for (auto& [key, value] : decoder.items()) {
    const std::string where = "added_tokens_decoder[\"" + key + "\"]";
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id >= (1LL << 24))
      throw Error(path, where + ": the key must be a token id in [0, 16777216)");
    if (!value.is_object() || !value.contains("content") || !value["content"].is_string() ||
        value["content"].get<std::string>().empty())
      throw Error(path, where + " is " + value.dump() + ", expected {\"content\": \"...\", ...}");
    AddedToken t = *token_of(value);
    t.id = static_cast<int32_t>(id);
    t.special = member_true(value, "special");
    out->added_tokens.push_back(t);
  }
}

}  // namespace

TokenizerConfig read_tokenizer_config(const std::string& folder) {
  TokenizerConfig out;
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const fs::path path = fs::path(folder) / name;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    out.present = true;
    const nlohmann::json config = read_tokenizer_json(path.string());
    if (!config.is_object()) continue;
    if (std::string(name) == "tokenizer_config.json") {
      out.legacy = flag(config, "legacy");
      out.add_prefix_space = flag(config, "add_prefix_space");
      // transformers' GemmaTokenizer takes neither key: each piece between added tokens is the
      // model's own encoding (Gemma's has no dummy prefix), ftx's legacy path, whatever they say.
      auto cls = config.find("tokenizer_class");
      if (cls != config.end() && cls->is_string() && cls->get<std::string>().rfind("Gemma", 0) == 0)
        out.legacy = true, out.add_prefix_space.reset();
      if (config.contains("added_tokens_decoder")) read_added_tokens(config["added_tokens_decoder"], path.string(), &out);
    }
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
      auto it = config.find(key);
      if (it == config.end()) continue;
      std::optional<AddedToken> t = token_of(*it);
      if (!t) continue;
      out.special_tokens.push_back(*t);
      std::string* named = std::string(key) == "bos_token"   ? &out.bos_token
                           : std::string(key) == "eos_token" ? &out.eos_token
                           : std::string(key) == "unk_token" ? &out.unk_token
                                                             : nullptr;
      if (named && named->empty()) *named = t->content;
    }
    auto extra = config.find("additional_special_tokens");
    if (extra != config.end() && extra->is_array())
      for (const auto& v : *extra)
        if (std::optional<AddedToken> t = token_of(v)) out.special_tokens.push_back(*t);
  }
  return out;
}

std::string find_chat_template(const std::string& folder) {
  const fs::path config = fs::path(folder) / "tokenizer_config.json";
  std::error_code ec;
  if (fs::is_regular_file(config, ec)) {
    try {
      const nlohmann::json doc = read_tokenizer_json(config.string());
      if (doc.is_object() && doc.contains("chat_template") && !doc["chat_template"].is_null()) return config.string();
    } catch (const Error&) {
      // An unreadable config is the tokenizer's error to report, not this note's.
    }
  }
  for (const char* name : {"chat_template.jinja", "chat_template.json"})
    if (fs::is_regular_file(fs::path(folder) / name, ec)) return (fs::path(folder) / name).string();
  return "";
}

}  // namespace ftx
