#include "lib/tokenizer/hf_bpe_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/tokenizer_files.h"

namespace ftx {
namespace {

bool is_null_or_false(const nlohmann::json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }
bool is_null_or_empty(const nlohmann::json& v) { return v.is_null() || (v.is_string() && v.get<std::string>().empty()); }

// A special token named in tokenizer_config.json / special_tokens_map.json: "<s>" or
// {"content": "<s>", ...}; "" when absent.
std::string token_name(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

void HfBpeTokenizer::AddedTokenMatcher::add(const AddedToken& t) {
  auto at = std::find_if(tokens_.begin(), tokens_.end(),
                         [&](const AddedToken& o) { return o.content.size() < t.content.size(); });
  tokens_.insert(at, t);  // stable: among equal lengths, file order (contents differ anyway)
  starts_[static_cast<uint8_t>(t.content[0])] = true;
}

template <class TextFn, class TokenFn>
void HfBpeTokenizer::AddedTokenMatcher::split(std::string_view text, TextFn&& text_fn, TokenFn&& token_fn) const {
  size_t gap = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* hit = nullptr;
    if (starts_[static_cast<uint8_t>(text[pos])])
      for (const AddedToken& t : tokens_)  // longest first: the first that matches is the longest
        if (text.compare(pos, t.content.size(), t.content) == 0) {
          hit = &t;
          break;
        }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > gap) text_fn(text.substr(gap, pos - gap));
    token_fn(hit->id);
    pos += hit->content.size();
    gap = pos;
  }
  if (gap < text.size()) text_fn(text.substr(gap));
}

HfBpeTokenizer::HfBpeTokenizer(const std::string& tokenizer_json_path) : path_(tokenizer_json_path) {
  nlohmann::json doc = read_tokenizer_json(path_);
  if (!doc.is_object()) throw Error(path_, "expected a JSON object (a tokenizers file)");
  if (!doc.contains("model") || !doc["model"].is_object()) throw Error(path_, "has no \"model\" object");
  load_model(doc["model"]);
  normalizer_ = std::make_unique<HfNormalizer>(doc.value("normalizer", nlohmann::json()), path_);
  pre_tokenizer_ = std::make_unique<HfPreTokenizer>(doc.value("pre_tokenizer", nlohmann::json()), path_);

  const nlohmann::json decoder = doc.value("decoder", nlohmann::json());
  std::string decoder_type = decoder.is_object() ? decoder.value("type", std::string("(no type)")) : decoder.dump();
  if (decoder_type != "ByteLevel")
    throw Error(path_, "decoder " + quote_for_message(decoder_type) + " is not supported; byte-level BPE needs ByteLevel");

  if (doc.contains("added_tokens")) load_added_tokens(doc["added_tokens"]);
  find_special_ids();
}

HfBpeTokenizer::~HfBpeTokenizer() = default;

void HfBpeTokenizer::load_model(const nlohmann::json& model) {
  // Older files have no "type"; a model with merges is BPE there.
  std::string type = model.value("type", std::string(model.contains("merges") ? "BPE" : "(no type)"));
  if (type != "BPE")
    throw Error(path_, "model type " + quote_for_message(type) + " is not supported; ftx reads byte-level \"BPE\" models");
  auto field = [&](const char* name) { return model.value(name, nlohmann::json()); };
  if (!field("dropout").is_null() && !(field("dropout").is_number() && field("dropout").get<double>() == 0.0))
    throw Error(path_, "model has BPE dropout " + field("dropout").dump() + ", which makes encoding random; not supported");
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!is_null_or_empty(field(name)))
      throw Error(path_, std::string("model has ") + name + " " + field(name).dump() + ", which byte-level BPE does not use; not supported");
  if (!model.contains("vocab")) throw Error(path_, "model has no \"vocab\"");

  bpe_ = std::make_unique<ByteLevelBpe>(model["vocab"], path_ + " model.vocab", /*require_all_bytes=*/false);
  bpe_->set_ignore_merges(!is_null_or_false(field("ignore_merges")));
  const nlohmann::json unk = field("unk_token");
  if (!unk.is_null()) {
    if (!unk.is_string() || !bpe_->find(unk.get<std::string>()))
      throw Error(path_, "model unk_token " + unk.dump() + " is not in model.vocab");
    bpe_->set_unk_id(bpe_->find(unk.get<std::string>()));
  }
  // byte_fallback turns characters with no token into <0xXX> tokens; with a complete byte
  // alphabet no character lacks a token, and ByteLevelBpe's unk handling covers the rest.

  const nlohmann::json merges = field("merges");
  if (!merges.is_array()) throw Error(path_, "model has no \"merges\" list");
  for (size_t i = 0; i < merges.size(); ++i) {
    const nlohmann::json& m = merges[i];
    std::string left, right;
    if (m.is_string()) {  // "left right"
      const std::string s = m.get<std::string>();
      size_t space = s.find(' ');
      if (space == 0 || space == std::string::npos || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos)
        throw Error(path_, "model.merges[" + std::to_string(i) + "] is " + quote_for_message(s) +
                               ", expected two tokens separated by one space");
      left = s.substr(0, space), right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["left", "right"]
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    } else {
      throw Error(path_, "model.merges[" + std::to_string(i) + "] is " + m.dump() +
                             ", expected \"left right\" or [\"left\", \"right\"]");
    }
    if (!bpe_->add_merge(left, right))
      throw Error(path_, "model.merges[" + std::to_string(i) + "] makes " + quote_for_message(left + right) +
                             ", which is not in model.vocab");
  }
}

void HfBpeTokenizer::load_added_tokens(const nlohmann::json& added) {
  if (!added.is_array()) throw Error(path_, "added_tokens is not a list");
  for (size_t i = 0; i < added.size(); ++i) {
    const nlohmann::json& t = added[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string() || t["content"].get<std::string>().empty())
      throw Error(path_, where + " is " + t.dump() + ", expected {\"id\": N, \"content\": \"...\", ...}");
    AddedToken token{t["content"].get<std::string>(), static_cast<int32_t>(t["id"].get<int64_t>()),
                     t.value("special", false)};
    for (const char* f : {"lstrip", "rstrip", "single_word"})
      if (t.value(f, false))
        throw Error(path_, where + " " + quote_for_message(token.content) + " has " + f +
                               ": true, which ftx does not support");
    if (t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() >= (int64_t{1} << 24))
      throw Error(path_, where + " has id " + t["id"].dump() + ", expected an integer in [0, 16777216)");
    for (const AddedToken& other : added_)
      if (other.id == token.id && other.content != token.content)
        throw Error(path_, "id " + std::to_string(token.id) + " is given to both added tokens " +
                               quote_for_message(other.content) + " and " + quote_for_message(token.content));
    // tokenizers' id_to_token and decoding look at added tokens before the model.
    bpe_->set_token(token.id, token.content);
    // Special tokens default to not normalized, others to normalized (tokenizers' AddedToken).
    // Normalized ones are looked for in normalized text, spelled normalized (as tokenizers does).
    if (t.value("normalized", !token.special)) {
      AddedToken spelled = token;
      spelled.content = normalizer_->normalize(token.content);
      if (!spelled.content.empty()) normalized_tokens_.add(spelled);
    } else {
      raw_tokens_.add(token);
    }
    added_.push_back(token);
  }
}

void HfBpeTokenizer::find_special_ids() {
  auto id_of = [&](const std::string& content) -> std::optional<int32_t> {
    for (const AddedToken& t : added_)
      if (t.content == content) return t.id;
    return bpe_->find(content);
  };
  const std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(dir / name, ec)) continue;
    nlohmann::json config = read_tokenizer_json((dir / name).string());
    if (!config.is_object()) continue;
    if (!bos_) {
      std::string bos = token_name(config, "bos_token");
      if (!bos.empty()) bos_ = id_of(bos);
    }
    if (!eos_) {
      std::string eos = token_name(config, "eos_token");
      if (!eos.empty()) eos_ = id_of(eos);
    }
  }
  if (!bos_) bos_ = id_of("<s>") ? id_of("<s>") : id_of("<|endoftext|>");
  if (!eos_) eos_ = id_of("</s>") ? id_of("</s>") : id_of("<|endoftext|>");
}

void HfBpeTokenizer::encode_normalized_piece(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<std::string> pieces;
  pre_tokenizer_->split(text, &pieces);
  for (const std::string& piece : pieces) bpe_->append_piece(piece, out);
}

void HfBpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>* out) const {
  std::string normalized = normalizer_->is_identity() ? std::string() : normalizer_->normalize(text);
  std::string_view view = normalizer_->is_identity() ? text : std::string_view(normalized);
  normalized_tokens_.split(
      view, [&](std::string_view piece) { encode_normalized_piece(piece, out); },
      [&](int32_t id) { out->push_back(id); });
}

std::vector<int32_t> HfBpeTokenizer::encode(std::string_view utf8) const {
  std::vector<int32_t> out;
  out.reserve(utf8.size() / 3 + 4);
  raw_tokens_.split(
      utf8, [&](std::string_view piece) { encode_text(piece, &out); }, [&](int32_t id) { out.push_back(id); });
  return out;
}

}  // namespace ftx
