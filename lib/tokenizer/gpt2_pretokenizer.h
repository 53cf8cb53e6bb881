#pragma once
// GPT-2's pre-tokenization: the pieces that Python `regex` finds with
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched by hand over code points (no regex engine), with the character classes of Python
// `regex`: \s is Unicode White_Space (U+0085 yes, U+001C..U+001F no), \p{L} is Lu Ll Lt Lm Lo,
// \p{N} is Nd Nl No, taken from ICU. Bytes that are not valid UTF-8 count as one "other" code
// point each, as Python's surrogateescape code points would.
#include <string_view>
#include <vector>

namespace ftx {

class Gpt2PreTokenizer {
 public:
  // The pieces of `text`, in order; they cover `text` exactly, as views into it.
  static void split(std::string_view text, std::vector<std::string_view>* pieces);
  static std::vector<std::string_view> split(std::string_view text);
};

}  // namespace ftx
