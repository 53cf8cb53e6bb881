#include "lib/tokenizer/gpt2_pretokenizer.h"

#include <unicode/uchar.h>

#include <array>
#include <cstdint>

#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

// The four classes the pattern distinguishes, plus the plain space its ` ?` prefixes accept.
enum CharClass : uint8_t { kOther = 0, kLetter, kNumber, kSpace, kWhite };

CharClass classify_with_icu(char32_t c) {
  if (c == utf8::kInvalid) return kOther;
  if (c == U' ') return kSpace;
  UChar32 u = static_cast<UChar32>(c);
  uint32_t gc = U_GET_GC_MASK(u);
  if (gc & U_GC_L_MASK) return kLetter;
  if (gc & U_GC_N_MASK) return kNumber;
  if (u_hasBinaryProperty(u, UCHAR_WHITE_SPACE)) return kWhite;
  return kOther;
}

// The BMP is looked up in a table built once (64 KiB); astral code points ask ICU each time.
const std::array<uint8_t, 0x10000>& bmp_classes() {
  static const std::array<uint8_t, 0x10000> table = [] {
    std::array<uint8_t, 0x10000> t{};
    for (char32_t c = 0; c < 0x10000; ++c) t[c] = classify_with_icu(c);
    return t;
  }();
  return table;
}

inline CharClass classify(const std::array<uint8_t, 0x10000>& bmp, char32_t c) {
  return c < 0x10000 ? static_cast<CharClass>(bmp[c]) : classify_with_icu(c);
}

inline bool is_white(uint8_t c) { return c == kSpace || c == kWhite; }

// Length in bytes of the contraction ('s 't 're 've 'm 'll 'd) starting at text[pos], or 0. All
// of these are ASCII, and an ASCII byte is always a whole code point, so bytes can be compared.
size_t contraction_length(std::string_view text, size_t pos) {
  if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
  char a = text[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  char b = text[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

void Gpt2PreTokenizer::split(std::string_view text, std::vector<std::string_view>* pieces) {
  pieces->clear();
  if (text.empty()) return;
  const auto& bmp = bmp_classes();

  // Decode once: the class and byte offset of every code point; offsets[n] == text.size().
  std::vector<uint8_t> cls;
  std::vector<size_t> offsets;
  cls.reserve(text.size());
  offsets.reserve(text.size() + 1);
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t pos = 0; pos < text.size();) {
    char32_t c;
    size_t len = utf8::decode(bytes + pos, text.size() - pos, &c);
    cls.push_back(classify(bmp, c));
    offsets.push_back(pos);
    pos += len;
  }
  const size_t n = cls.size();
  offsets.push_back(text.size());

  auto emit = [&](size_t begin, size_t end) {
    pieces->push_back(text.substr(offsets[begin], offsets[end] - offsets[begin]));
  };
  auto run_end = [&](size_t from, uint8_t c) {  // first index >= from whose class is not c
    while (from < n && cls[from] == c) ++from;
    return from;
  };

  // The alternatives are tried in the pattern's order at each start; the first that matches wins.
  size_t i = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d
    if (size_t len = contraction_length(text, offsets[i])) {
      size_t j = i + len;  // ASCII: one code point per byte
      emit(i, j);
      i = j;
      continue;
    }
    //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ : the classes are disjoint, so at most one can
    // match; the optional space is taken only when the class follows it.
    uint8_t c = cls[i];
    size_t body = i;
    if (c == kSpace && i + 1 < n && !is_white(cls[i + 1])) {
      body = i + 1;
      c = cls[body];
    }
    if (c == kLetter || c == kNumber || c == kOther) {
      size_t j = run_end(body + 1, c);
      emit(i, j);
      i = j;
      continue;
    }
    // \s+(?!\S) | \s+ : the whole white-space run when it ends the text; otherwise the run minus
    // its last character (which then prefixes the next word), unless that would leave nothing.
    size_t j = i + 1;
    while (j < n && is_white(cls[j])) ++j;
    if (j < n && j - i >= 2) --j;
    emit(i, j);
    i = j;
  }
}

std::vector<std::string_view> Gpt2PreTokenizer::split(std::string_view text) {
  std::vector<std::string_view> pieces;
  split(text, &pieces);
  return pieces;
}

}  // namespace ftx
