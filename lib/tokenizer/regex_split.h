#pragma once
// A tokenizer.json Split pre-tokenizer with a general regular expression (Llama 3's and Qwen2's
// patterns: `(?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...`),
// behavior "Isolated": the matches and the text between them are the pieces. Matched with ICU's
// regex engine; `tokenizers` uses Oniguruma, whose `\s` is Unicode's White_Space property while
// ICU's lacks U+000B and U+0085, so `\s` / `\S` are rewritten to \p{White_Space} / \P{White_Space}.
// Bytes that are not valid UTF-8 match as U+FFFD and stay as they were in the pieces.
#include <unicode/uversion.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

U_NAMESPACE_BEGIN
class RegexPattern;
U_NAMESPACE_END

namespace ftx {

// "" when every escape and group of `pattern` is one ICU and Oniguruma read alike: \s \S \r \n
// \t \f \v, \p{..} / \P{..} of a general category (L, Lu, N, Nd, ...), escaped punctuation;
// (?i:...), (?:...), (?!...), (?=...). Else what is not (an escape such as \w, \d, \b, a
// backreference, a lookbehind, inline flags other than i).
std::string regex_construct_not_agreed(const std::string& pattern);

class RegexSplit {
 public:
  // Error(path, ...) naming the pattern when ICU cannot compile it.
  RegexSplit(const std::string& pattern, const std::string& path);
  ~RegexSplit();
  // The [begin, end) byte spans of the non-empty matches in `piece`, in order.
  std::vector<std::pair<size_t, size_t>> matches(const std::string& piece) const;
  // The matches and the text between them, as pieces (behavior "Isolated").
  void split(const std::string& piece, std::vector<std::string>* out) const;

 private:
  std::unique_ptr<icu::RegexPattern> pattern_;
};

}  // namespace ftx
