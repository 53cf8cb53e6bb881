#include "lib/tokenizer/hf_bpe_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/byte_level_bpe.h"
#include "lib/tokenizer/char_bpe.h"
#include "lib/tokenizer/tokenizer_config.h"
#include "lib/tokenizer/tokenizer_files.h"

namespace ftx {
namespace {

bool is_null_or_false(const nlohmann::json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }
bool is_null_or_empty(const nlohmann::json& v) { return v.is_null() || (v.is_string() && v.get<std::string>().empty()); }

// What the "decoder" says about the model: byte-level, or SentencePiece-style with a Strip step.
struct DecoderKind {
  bool byte_level = true;
  int strip_start = 0, strip_stop = 0;
};

// ByteLevel, or exactly LlamaConverter's Sequence [Replace "▁" by " ", ByteFallback, Fuse, Strip
// " " (optional)]; anything else is an Error naming it.
DecoderKind read_decoder(const nlohmann::json& decoder, const std::string& path) {
  auto type_of = [](const nlohmann::json& d) {
    return d.is_object() && d.contains("type") && d["type"].is_string() ? d["type"].get<std::string>() : d.dump();
  };
  const std::string type = decoder.is_null() ? std::string("(none)") : type_of(decoder);
  auto unsupported = [&](const std::string& what) {
    return Error(path, "decoder " + what + " is not supported; ftx reads ByteLevel (byte-level BPE) and Sequence "
                       "[Replace \"\u2581\" by \" \", ByteFallback, Fuse, Strip] (SentencePiece-style BPE: Llama 2, Mistral)");
  };
  if (type == "ByteLevel") return DecoderKind{};
  if (type != "Sequence" || !decoder.contains("decoders") || !decoder["decoders"].is_array())
    throw unsupported(quote_for_message(type));
  const nlohmann::json& steps = decoder["decoders"];
  std::string list;
  for (const auto& step : steps) list += (list.empty() ? "" : ", ") + type_of(step);
  const nlohmann::json space_to_blank = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  const bool fits = (steps.size() == 3 || steps.size() == 4) && steps[0] == space_to_blank &&
                    type_of(steps[1]) == "ByteFallback" && type_of(steps[2]) == "Fuse";
  if (!fits) throw unsupported("Sequence [" + list + "]");
  DecoderKind kind;
  kind.byte_level = false;
  if (steps.size() == 4) {
    const nlohmann::json& strip = steps[3];
    if (type_of(strip) != "Strip" || strip.value("content", nlohmann::json()) != " " ||
        !strip.value("start", nlohmann::json()).is_number_unsigned() || !strip.value("stop", nlohmann::json()).is_number_unsigned())
      throw unsupported("Sequence [" + list + "] with " + strip.dump());
    kind.strip_start = static_cast<int>(std::min<uint64_t>(strip["start"].get<uint64_t>(), 1 << 20));
    kind.strip_stop = static_cast<int>(std::min<uint64_t>(strip["stop"].get<uint64_t>(), 1 << 20));
  }
  return kind;
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(const std::string& tokenizer_json_path) : path_(tokenizer_json_path) {
  nlohmann::json doc = read_tokenizer_json(path_);
  if (!doc.is_object()) throw Error(path_, "expected a JSON object (a tokenizers file)");
  if (!doc.contains("model") || !doc["model"].is_object()) throw Error(path_, "has no \"model\" object");
  const DecoderKind decoder = read_decoder(doc.value("decoder", nlohmann::json()), path_);
  byte_level_ = decoder.byte_level;
  load_model(doc["model"]);
  if (!byte_level_) static_cast<CharBpe&>(*bpe_).set_strip(decoder.strip_start, decoder.strip_stop);
  normalizer_ = std::make_unique<HfNormalizer>(doc.value("normalizer", nlohmann::json()), path_);
  const nlohmann::json pre_tokenizer = doc.value("pre_tokenizer", nlohmann::json());
  pre_tokenizer_ = std::make_unique<HfPreTokenizer>(pre_tokenizer, path_);
  if (byte_level_ && pre_tokenizer.is_null())
    throw Error(path_, "has no pre_tokenizer; ftx's byte-level BPE needs a ByteLevel pre_tokenizer");
  if (byte_level_ && !pre_tokenizer_->byte_level())
    throw Error(path_, "pre_tokenizer has no ByteLevel step, so it is not a byte-level BPE tokenizer");
  if (!byte_level_ && pre_tokenizer_->byte_level())
    throw Error(path_, "pre_tokenizer has a ByteLevel step, but the decoder is SentencePiece-style (ByteFallback); "
                       "not supported");

  if (doc.contains("added_tokens")) load_added_tokens(doc["added_tokens"]);
  find_special_ids();
}

HfBpeTokenizer::~HfBpeTokenizer() = default;

void HfBpeTokenizer::load_model(const nlohmann::json& model) {
  // Older files have no "type"; a model with merges is BPE there.
  std::string type = model.value("type", std::string(model.contains("merges") ? "BPE" : "(no type)"));
  if (type != "BPE")
    throw Error(path_, "model type " + quote_for_message(type) + " is not supported; ftx reads \"BPE\" models");
  auto field = [&](const char* name) { return model.value(name, nlohmann::json()); };
  if (!field("dropout").is_null() && !(field("dropout").is_number() && field("dropout").get<double>() == 0.0))
    throw Error(path_, "model has BPE dropout " + field("dropout").dump() + ", which makes encoding random; not supported");
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!is_null_or_empty(field(name)))
      throw Error(path_, std::string("model has ") + name + " " + field(name).dump() + ", which ftx does not support");
  if (!model.contains("vocab")) throw Error(path_, "model has no \"vocab\"");

  if (byte_level_) {
    bpe_ = std::make_unique<ByteLevelBpe>(model["vocab"], path_ + " model.vocab", /*require_all_bytes=*/false);
  } else {
    // tokenizers' defaults for both: false.
    bpe_ = std::make_unique<CharBpe>(model["vocab"], path_ + " model.vocab", !is_null_or_false(field("byte_fallback")),
                                     !is_null_or_false(field("fuse_unk")));
  }
  bpe_->set_ignore_merges(!is_null_or_false(field("ignore_merges")));
  const nlohmann::json unk = field("unk_token");
  if (!unk.is_null()) {
    if (!unk.is_string() || !bpe_->find(unk.get<std::string>()))
      throw Error(path_, "model unk_token " + unk.dump() + " is not in model.vocab");
    bpe_->set_unk_id(bpe_->find(unk.get<std::string>()));
  }
  // byte_fallback turns characters with no token into <0xXX> tokens: CharBpe's; with a byte-level
  // model's complete byte alphabet no character lacks a token, and ByteLevelBpe's unk handling
  // covers the rest.

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
    AddedToken token;
    token.content = t["content"].get<std::string>();
    token.id = static_cast<int32_t>(t["id"].get<int64_t>());
    token.special = t.value("special", false);
    for (const char* f : {"lstrip", "rstrip", "single_word"})
      if (t.contains(f) && !t[f].is_boolean() && !t[f].is_null())
        throw Error(path_, where + " " + quote_for_message(token.content) + " has " + f + ": " + t[f].dump() +
                               ", expected true or false");
    auto flag = [&](const char* f) { return t.contains(f) && t[f].is_boolean() && t[f].get<bool>(); };
    token.lstrip = flag("lstrip"), token.rstrip = flag("rstrip"), token.single_word = flag("single_word");
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
  const TokenizerConfig config = read_tokenizer_config(folder());
  if (!config.bos_token.empty()) bos_ = id_of(config.bos_token);
  if (!config.eos_token.empty()) eos_ = id_of(config.eos_token);
  if (!bos_) bos_ = id_of("<s>") ? id_of("<s>") : id_of("<|endoftext|>");
  if (!eos_) eos_ = id_of("</s>") ? id_of("</s>") : id_of("<|endoftext|>");
}

std::string HfBpeTokenizer::folder() const { return std::filesystem::path(path_).parent_path().string(); }

void HfBpeTokenizer::encode_normalized_piece(std::string_view text, bool at_start, std::vector<int32_t>* out) const {
  std::vector<std::string> pieces;
  pre_tokenizer_->split(text, &pieces, at_start);
  for (const std::string& piece : pieces) bpe_->append_piece(piece, out);
}

// `at_start`: `text` begins the whole text (tokenizers' offset 0, which Metaspace's "first" asks).
void HfBpeTokenizer::encode_text(std::string_view text, bool at_start, std::vector<int32_t>* out) const {
  std::string normalized = normalizer_->is_identity() ? std::string() : normalizer_->normalize(text);
  std::string_view view = normalizer_->is_identity() ? text : std::string_view(normalized);
  for (const AddedTokenMatcher::Span& s : normalized_tokens_.split_like_tokenizers(view)) {
    if (s.token) out->push_back(s.token->id);
    else encode_normalized_piece(view.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, out);
  }
}

std::vector<int32_t> HfBpeTokenizer::encode(std::string_view utf8) const {
  std::vector<int32_t> out;
  out.reserve(utf8.size() / 3 + 4);
  for (const AddedTokenMatcher::Span& s : raw_tokens_.split_like_tokenizers(utf8)) {
    if (s.token) out.push_back(s.token->id);
    else encode_text(utf8.substr(s.begin, s.end - s.begin), s.begin == 0, &out);
  }
  return out;
}

}  // namespace ftx
