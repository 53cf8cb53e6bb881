#include "lib/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "lib/tokenizer/tokenizer_config.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's word boundary

// ModelProto field 3 (normalizer_spec) holding NormalizerSpec field 3 (add_dummy_prefix) = false.
// Appended to a serialized model, protobuf merges it into the model's normalizer_spec: what
// LlamaTokenizer does with model.normalizer_spec.MergeFrom(...) for legacy: false.
constexpr std::string_view kNoDummyPrefix("\x1A\x02\x18\x00", 4);

// Python's str.isspace(), which str.strip() uses (transformers strips with it).
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// s.lstrip() / s.rstrip() with Python's white space.
std::string strip_left(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c;
    size_t len = utf8::decode(p + pos, s.size() - pos, &c);
    if (!is_python_space(c)) break;
    pos += len;
  }
  return s.substr(pos);
}

std::string strip_right(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t end = 0;  // after the last character that is not white space
  for (size_t pos = 0; pos < s.size();) {
    char32_t c;
    pos += utf8::decode(p + pos, s.size() - pos, &c);
    if (!is_python_space(c)) end = pos;
  }
  return s.substr(0, end);
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0;;) {
    size_t hit = s.find(from, pos);
    out.append(s.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    pos = hit + from.size();
  }
}

std::vector<int32_t> encode_with(const sentencepiece::SentencePieceProcessor& sp, std::string_view text,
                                 const std::string& path) {
  std::vector<int> ids;
  auto status = sp.Encode(text, &ids);
  if (!status.ok()) throw Error(path, "cannot encode text: " + status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path, bool transformers_tokens)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  // Read the bytes ourselves so a missing file gets ftx's usual message, then let the library parse.
  auto file = MappedFile::open(model_path);
  std::string_view bytes(reinterpret_cast<const char*>(file->data()), file->size());
  auto status = sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) throw Error(model_path, "not a SentencePiece model: " + status.ToString());
  vocab_size_ = sp_->GetPieceSize();
  if (!transformers_tokens) return;

  const TokenizerConfig config = read_tokenizer_config(folder());
  if (!config.present) return;  // a bare model (NeMo's, spm_train's): SentencePiece's own encoding
  legacy_ = config.legacy.value_or(true);  // LlamaTokenizer's default when the key is missing
  add_prefix_space_ = config.add_prefix_space.value_or(true);
  if (!config.unk_token.empty()) unk_token_ = config.unk_token;

  // The first of several tokens with one spelling wins: added_tokens_decoder's ids, then the named
  // special tokens, then LlamaTokenizer's defaults, the model's own <unk>, <s> and </s>.
  for (const AddedToken& t : config.added_tokens) add_token(t);
  for (AddedToken t : config.special_tokens) {
    const int id = sp_->PieceToId(t.content);  // the unknown id when it is no piece
    if (added_.count(t.content) || sp_->IdToPiece(id) != t.content) continue;  // no id known: left out
    t.id = id;
    add_token(t);
  }
  for (int id : {sp_->unk_id(), sp_->bos_id(), sp_->eos_id()}) {
    if (id < 0) continue;
    AddedToken t;
    t.content = sp_->IdToPiece(id);
    t.id = id;
    t.special = true;
    if (!t.content.empty() && !added_.count(t.content)) add_token(t);
  }

  if (!legacy_) {
    no_prefix_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
    std::string merged(bytes);
    merged.append(kNoDummyPrefix);
    status = no_prefix_->LoadFromSerializedProto(merged);
    if (!status.ok()) throw Error(model_path, "not a SentencePiece model: " + status.ToString());
    unk_length_ = encode_with(*no_prefix_, unk_token_, path_).size();
    const int space = sp_->PieceToId(std::string(kSpace));
    space_id_ = sp_->IdToPiece(space) == kSpace ? space : -1;
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::add_token(const AddedToken& t) {
  if (added_.count(t.content)) return;
  added_.emplace(t.content, t);
  matcher_.add(t);
  if (t.id >= static_cast<int32_t>(sp_->GetPieceSize())) {
    past_model_[t.id] = t.content;
    vocab_size_ = std::max(vocab_size_, t.id + 1);
  }
}

std::string SentencePieceTokenizer::folder() const { return std::filesystem::path(path_).parent_path().string(); }

// LlamaTokenizer._tokenize: legacy encodes each piece of text as the model does (dummy prefix and
// all); otherwise the model without its dummy prefix, and text that starts with a space is encoded
// behind unk_token, whose ids are then dropped, so the model's normalizer cannot strip that space.
void SentencePieceTokenizer::encode_piece(const std::string& text, std::vector<int32_t>* out) const {
  std::vector<int32_t> ids;
  if (legacy_) {
    ids = encode_with(*sp_, text, path_);
  } else if (text.rfind(kSpace, 0) == 0 || text[0] == ' ') {
    ids = encode_with(*no_prefix_, unk_token_ + text, path_);
    if (ids.size() >= unk_length_) ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(unk_length_));
  } else {
    ids = encode_with(*no_prefix_, text, path_);
  }
  out->insert(out->end(), ids.begin(), ids.end());
}

// transformers 4.45's LlamaTokenizer.tokenize and PreTrainedTokenizer.tokenize, step by step.
std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view utf8) const {
  if (added_.empty() && legacy_) return encode_with(*sp_, utf8, path_);
  const bool prefixed = !legacy_ && !utf8.empty();
  std::string text(utf8);
  if (prefixed) {
    text = replace_all(utf8, kSpace, " ");
    if (add_prefix_space_) text.insert(0, kSpace);
  }
  std::vector<std::string> parts;  // text and tokens, as Trie.split gives them
  matcher_.split(
      text, [&](std::string_view piece) { parts.emplace_back(piece); },
      [&](const AddedToken& t) { parts.push_back(t.content); });

  // A token's flags act on the parts beside it (which may have been changed by the token before).
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = added_.find(parts[i]);
    if (it == added_.end()) continue;
    const AddedToken& t = it->second;
    std::string* left = i > 0 ? &parts[i - 1] : nullptr;
    std::string* right = i + 1 < parts.size() ? &parts[i + 1] : nullptr;
    if (t.rstrip && right && !right->empty()) *right = strip_left(*right);
    if (t.lstrip && left && !left->empty()) *left = strip_right(*left);
    if (t.single_word && left && !left->empty() && left->back() != ' ') {
      *left += parts[i];
      parts[i].clear();
    } else if (t.single_word && right && !right->empty() && (*right)[0] != ' ') {
      parts[i] += *right;
      right->clear();
    }
  }

  std::vector<int32_t> ids;
  ids.reserve(utf8.size() / 3 + 4);
  bool first_is_space = false;  // the first part's ids are just "▁"
  const AddedToken* second = nullptr;  // the token right after it
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    auto it = added_.find(part);
    const size_t before = ids.size();
    if (it != added_.end()) {
      if (before == 1 && first_is_space) second = &it->second;
      ids.push_back(it->second.id);
    } else {
      encode_piece(part, &ids);
      if (before == 0) first_is_space = ids.size() >= 1 && ids[0] == space_id_;
    }
  }
  // LlamaTokenizer drops the "▁" it put in front of a text that starts with a special token.
  if (prefixed && first_is_space && second && second->special) ids.erase(ids.begin());
  return ids;
}

void SentencePieceTokenizer::check_id(int32_t id) const {
  // The library would abort or misbehave on an id outside the model, so it never sees one.
  if (id < 0 || id >= vocab_size() || (id >= sp_->GetPieceSize() && !past_model_.count(id)))
    throw Error(path_, "token id " + std::to_string(id) + " is not in the vocabulary (" +
                           std::to_string(vocab_size()) + " ids)");
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  for (int32_t id : ids) check_id(id);
  std::string text;
  std::vector<int> run;  // the model's ids since the last added token past the model
  auto flush = [&] {
    if (run.empty()) return;
    std::string piece;
    auto status = sp_->Decode(run, &piece);
    if (!status.ok()) throw Error(path_, "cannot decode ids: " + status.ToString());
    text += piece;
    run.clear();
  };
  for (int32_t id : ids) {
    if (id < sp_->GetPieceSize()) {
      run.push_back(id);
    } else {
      flush();
      text += past_model_.at(id);
    }
  }
  flush();
  return text;
}

int32_t SentencePieceTokenizer::vocab_size() const { return vocab_size_; }

std::string SentencePieceTokenizer::id_to_token(int32_t id) const {
  check_id(id);
  return id < sp_->GetPieceSize() ? sp_->IdToPiece(id) : past_model_.at(id);
}

std::optional<int32_t> SentencePieceTokenizer::bos_id() const {
  int id = sp_->bos_id();  // -1 when the model has none
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<int32_t> SentencePieceTokenizer::eos_id() const {
  int id = sp_->eos_id();
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

}  // namespace ftx
