// Split pre-tokenizers with general patterns (lib/tokenizer/regex_split.h): Llama 3's pattern on
// strings whose pieces Python's `regex` module (Oniguruma's semantics for these constructs) gives,
// and `\s` as Unicode's White_Space (U+000B, U+0085 included), as in `tokenizers`.
#include <gtest/gtest.h>

#include "formats/error.h"
#include "lib/tokenizer/regex_split.h"

namespace ftx {
namespace {

const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> pieces(const RegexSplit& r, const std::string& text) {
  std::vector<std::string> out;
  r.split(text, &out);
  return out;
}

TEST(RegexSplit, Llama3Pattern) {
  const RegexSplit r(kLlama3, "tokenizer.json");
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(r, "Hello world's 12345"), (V{"Hello", " world", "'s", " ", "123", "45"}));
  EXPECT_EQ(pieces(r, "I'M  ok\n\n  x"), (V{"I", "'M", " ", " ok", "\n\n", " ", " x"}));
  EXPECT_EQ(pieces(r, "a\vb\u0085c  \U0001F600!!"), (V{"a", "\vb", "\u0085c", " ", " \U0001F600!!"}));
}

TEST(RegexSplit, WhiteSpaceIsUnicodes) {
  const RegexSplit r(R"(\s+|\S+)", "tokenizer.json");
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(r, "a\u0085\vb"), (V{"a", "\u0085\v", "b"}));
  // Bytes that are not UTF-8 stay as they were, inside the pieces around them.
  EXPECT_EQ(pieces(r, std::string("x\xff y")), (V{"x\xff", " ", "y"}));
}

TEST(RegexSplit, OnlyConstructsBothEnginesReadAlike) {
  EXPECT_EQ(regex_construct_not_agreed(kLlama3), "");
  EXPECT_EQ(regex_construct_not_agreed(R"( ?\p{Lu}+(?=\.)|\s+)"), "");
  EXPECT_NE(regex_construct_not_agreed(R"(\w+)").find("\\w"), std::string::npos);
  EXPECT_NE(regex_construct_not_agreed(R"(\d+)").find("\\d"), std::string::npos);
  EXPECT_NE(regex_construct_not_agreed(R"(\p{Alphabetic}+)").find("Alphabetic"), std::string::npos);
  EXPECT_NE(regex_construct_not_agreed(R"((?<=a)b)").find("(?<="), std::string::npos);
  EXPECT_NE(regex_construct_not_agreed(R"((a)\1)").find("\\1"), std::string::npos);
}

TEST(RegexSplit, BadPatternNamesTheFile) {
  try {
    RegexSplit r("(unclosed", "tokenizer.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ftx
