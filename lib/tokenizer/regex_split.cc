#include "lib/tokenizer/regex_split.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <cctype>

#include "formats/error.h"
#include "lib/tokenizer/byte_level_bpe.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {

namespace {

// Oniguruma's \s and \S (Unicode White_Space) in ICU's spelling; everything else as written.
std::string oniguruma_white_space(const std::string& p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      if (e == 's') out += "\\p{White_Space}";
      else if (e == 'S') out += "\\P{White_Space}";
      else out += std::string{'\\', e};
    } else {
      out += p[i];
    }
  }
  return out;
}

bool general_category(const std::string& name) {
  static const char* kNames[] = {"L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
                                 "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So",
                                 "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

}  // namespace

std::string regex_construct_not_agreed(const std::string& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '(' && i + 1 < p.size() && p[i + 1] == '?') {
      const std::string g = p.substr(i, 4);
      if (g.rfind("(?i:", 0) != 0 && g.rfind("(?:", 0) != 0 && g.rfind("(?!", 0) != 0 && g.rfind("(?=", 0) != 0)
        return "group " + g + "... (ftx knows (?i: (?: (?! (?=)";
      continue;
    }
    if (p[i] != '\\' || i + 1 >= p.size()) continue;
    const char e = p[++i];
    if (std::string("sSrntfv").find(e) != std::string::npos) continue;
    if (e == 'p' || e == 'P') {
      const size_t close = p.find('}', i);
      if (i + 1 < p.size() && p[i + 1] == '{' && close != std::string::npos &&
          general_category(p.substr(i + 2, close - i - 2))) {
        i = close;
        continue;
      }
      return "property " + p.substr(i - 1, std::min<size_t>(close == std::string::npos ? 2 : close - i + 2, 24)) +
             " (ftx knows the general categories, such as \\p{L} and \\p{N})";
    }
    if (static_cast<unsigned char>(e) < 0x80 && std::ispunct(static_cast<unsigned char>(e))) continue;
    return std::string("escape \\") + e + " (ICU and Oniguruma differ on it)";
  }
  return "";
}

RegexSplit::RegexSplit(const std::string& pattern, const std::string& path) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError where{};
  pattern_.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(oniguruma_white_space(pattern)), 0, where,
                                            status));
  if (U_FAILURE(status) || !pattern_)
    throw Error(path, "pre_tokenizer Split pattern " + quote_for_message(pattern) + " does not compile (" +
                          u_errorName(status) + " at offset " + std::to_string(where.offset) + ")");
}

RegexSplit::~RegexSplit() = default;

std::vector<std::pair<size_t, size_t>> RegexSplit::matches(const std::string& piece) const {
  // UTF-16 for ICU, and the UTF-8 offset of every UTF-16 index, to cut the original bytes.
  icu::UnicodeString text;
  std::vector<size_t> byte_at;
  const auto* bytes = reinterpret_cast<const unsigned char*>(piece.data());
  for (size_t pos = 0; pos < piece.size();) {
    char32_t c;
    const size_t len = utf8::decode(bytes + pos, piece.size() - pos, &c);
    const UChar32 u = c == utf8::kInvalid ? 0xFFFD : static_cast<UChar32>(c);
    const int32_t before = text.length();
    text.append(u);
    for (int32_t k = before; k < text.length(); ++k) byte_at.push_back(pos);
    pos += len;
  }
  byte_at.push_back(piece.size());
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(text, status));
  if (U_FAILURE(status)) throw Error(std::string("regex matcher: ") + u_errorName(status));
  std::vector<std::pair<size_t, size_t>> spans;
  while (m->find(status) && U_SUCCESS(status)) {
    const size_t a = byte_at[static_cast<size_t>(m->start(status))], b = byte_at[static_cast<size_t>(m->end(status))];
    if (b == a) continue;  // empty matches split nothing (tokenizers skips them too)
    spans.emplace_back(a, b);
  }
  if (U_FAILURE(status)) throw Error(std::string("regex match: ") + u_errorName(status));
  return spans;
}

void RegexSplit::split(const std::string& piece, std::vector<std::string>* out) const {
  size_t gap = 0;
  auto emit = [&](size_t a, size_t b) {
    if (b > a) out->push_back(piece.substr(a, b - a));
  };
  for (const auto& [a, b] : matches(piece)) {
    emit(gap, a);
    emit(a, b);
    gap = b;
  }
  emit(gap, piece.size());
}

}  // namespace ftx
