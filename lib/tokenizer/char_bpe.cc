#include "lib/tokenizer/char_bpe.h"

#include <cstdio>

#include "formats/error.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁"
constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// The byte a "<0xXX>" spelling stands for (tokenizers: 6 characters, two hex digits), or -1.
int byte_of(const std::string& spelling) {
  if (spelling.size() != 6 || spelling.compare(0, 3, "<0x") != 0 || spelling[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = spelling[i];
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

bool valid_utf8(const std::string& bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t pos = 0; pos < bytes.size();) {
    char32_t c;
    pos += utf8::decode(p + pos, bytes.size() - pos, &c);
    if (c == utf8::kInvalid) return false;
  }
  return true;
}

}  // namespace

CharBpe::CharBpe(const nlohmann::json& vocab, std::string source, bool byte_fallback, bool fuse_unk)
    : BpeModel(vocab, std::move(source)), byte_fallback_(byte_fallback), fuse_unk_(fuse_unk) {
  for (int b = 0; b < 256; ++b) {
    char spelling[8];
    std::snprintf(spelling, sizeof spelling, "<0x%02X>", b);  // tokenizers' format!("<{:#04X}>", b)
    auto id = find(spelling);
    byte_ids_[b] = id ? *id : -1;
  }
}

void CharBpe::append_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  if (ignore_merges_)
    if (auto id = find(std::string(piece))) {
      out->push_back(*id);
      return;
    }
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  bool pending_unk = false;  // tokenizers adds an unknown character's id when the next token is known
  const auto* bytes = reinterpret_cast<const unsigned char*>(piece.data());
  for (size_t pos = 0; pos < piece.size();) {
    char32_t c;
    const size_t len = utf8::decode(bytes + pos, piece.size() - pos, &c);
    const std::string ch(piece.substr(pos, len));
    pos += len;
    if (auto id = find(ch)) {
      if (pending_unk) symbols.push_back(*unk_id_), pending_unk = false;
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : ch) all = all && byte_ids_[b] >= 0;
      if (all) {  // as tokenizers: a pending unknown id is not added before these
        for (unsigned char b : ch) symbols.push_back(byte_ids_[b]);
        continue;
      }
    }
    if (!unk_id_)
      throw Error(source_, "the text has " + quote_for_message(ch) +
                               ", which has no token in the vocabulary, and the model has no unk_token" +
                               (byte_fallback_ ? " (and no <0xXX> token for one of its bytes)" : " or byte_fallback"));
    if (pending_unk && fuse_unk_) continue;
    if (pending_unk) symbols.push_back(*unk_id_);
    pending_unk = true;
  }
  if (pending_unk) symbols.push_back(*unk_id_);
  merge(&symbols);
  out->insert(out->end(), symbols.begin(), symbols.end());
}

std::string CharBpe::decode(const std::vector<int32_t>& ids) const {
  std::string text, run;  // run: the bytes of consecutive <0xXX> tokens
  auto flush = [&] {
    if (run.empty()) return;
    if (valid_utf8(run)) {
      text += run;
    } else {
      for (size_t i = 0; i < run.size(); ++i) text += kReplacementCharacter;
    }
    run.clear();
  };
  for (int32_t id : ids) {
    check_id(id);
    const std::string& spelling = tokens_[id];
    const int byte = byte_of(spelling);
    if (byte >= 0) {
      run.push_back(static_cast<char>(byte));
      continue;
    }
    flush();
    for (size_t pos = 0;;) {  // Replace "▁" by " "
      size_t hit = spelling.find(kSpace, pos);
      text.append(spelling, pos, hit == std::string::npos ? std::string::npos : hit - pos);
      if (hit == std::string::npos) break;
      text += ' ';
      pos = hit + kSpace.size();
    }
  }
  flush();
  // Strip: whole characters equal to " " (one byte each), at most strip_start_ / strip_stop_.
  size_t begin = 0, end = text.size();
  while (begin < static_cast<size_t>(strip_start_) && begin < end && text[begin] == ' ') ++begin;
  for (int i = 0; i < strip_stop_ && end > begin && text[end - 1] == ' '; ++i) --end;
  return text.substr(begin, end - begin);
}

}  // namespace ftx
