#include "lib/tokenizer/added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

// Rust's char::is_whitespace: Unicode White_Space.
bool is_white_space(char32_t c) { return c != utf8::kInvalid && u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

// Rust regex's Unicode \w: Alphabetic, marks, decimal digits, connector punctuation, Join_Control.
bool is_word(char32_t c) {
  if (c == utf8::kInvalid) return false;
  const auto u = static_cast<UChar32>(c);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL) ||
         (U_GET_GC_MASK(u) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

// The last character of text[0, end) (kInvalid for a stray byte); `begin` gets where it starts.
char32_t char_before(std::string_view text, size_t end, size_t* begin) {
  size_t b = end - 1;
  while (b > 0 && end - b < 4 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  char32_t c;
  const size_t len = utf8::decode(reinterpret_cast<const unsigned char*>(text.data()) + b, end - b, &c);
  if (b + len != end) b = end - 1, c = utf8::kInvalid;  // not one whole character: the byte alone
  *begin = b;
  return c;
}

char32_t char_at(std::string_view text, size_t pos, size_t* len) {
  char32_t c;
  *len = utf8::decode(reinterpret_cast<const unsigned char*>(text.data()) + pos, text.size() - pos, &c);
  return c;
}

}  // namespace

void AddedTokenMatcher::add(const AddedToken& t) {
  auto at = std::find_if(tokens_.begin(), tokens_.end(),
                         [&](const AddedToken& o) { return o.content.size() < t.content.size(); });
  tokens_.insert(at, t);  // stable: among equal lengths, the order added (contents differ anyway)
  starts_[static_cast<uint8_t>(t.content[0])] = true;
}

std::vector<AddedTokenMatcher::Span> AddedTokenMatcher::split_like_tokenizers(std::string_view text) const {
  std::vector<Span> spans;
  size_t done = 0;  // tokenizers' start_offset: where the last token's span ended
  size_t len;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* hit = match_at(text, pos);
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + hit->content.size();
    pos = end;  // the matcher goes on after the match, taken or not
    if (hit->single_word) {
      size_t at;
      const bool word_before = begin > 0 && is_word(char_before(text, begin, &at));
      const bool word_after = end < text.size() && is_word(char_at(text, end, &len));
      if (word_before || word_after) continue;
    }
    if (hit->lstrip) {
      size_t b = begin, at;
      while (b > 0 && is_white_space(char_before(text, b, &at))) b = at;
      begin = std::max(b, done);
    }
    if (hit->rstrip)
      while (end < text.size() && is_white_space(char_at(text, end, &len))) end += len;
    if (done < begin) spans.push_back({done, begin, nullptr});
    spans.push_back({begin, end, hit});
    done = end;
  }
  if (done < text.size()) spans.push_back({done, text.size(), nullptr});
  return spans;
}

}  // namespace ftx
