// ROUGE as rouge_score computes it (lib/eval/rouge.h) on cases worked out by hand from its rules,
// and summarize.py's prompt (lib/eval/summarize.h), issue 49. tests/e2e/summarize/summarize_test.py
// compares many more texts with rouge_score itself.
#include <gtest/gtest.h>

#include "lib/eval/rouge.h"
#include "lib/eval/summarize.h"
#include "lib/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace {

using Tokens = std::vector<std::string>;

void expect_score(const ftx::RougeScore& s, double p, double r) {
  EXPECT_DOUBLE_EQ(s.precision, p);
  EXPECT_DOUBLE_EQ(s.recall, r);
  EXPECT_DOUBLE_EQ(s.fmeasure, p + r > 0 ? 2 * p * r / (p + r) : 0.0);
}

TEST(Rouge, TokenizerLowercasesAndSplitsOnEveryNonAlphanumeric) {
  EXPECT_EQ(ftx::rouge_tokenize("The Cat's 3 hats!"), (Tokens{"the", "cat", "s", "3", "hats"}));
  EXPECT_EQ(ftx::rouge_tokenize("  U.S.-based\tfirm\n(2024)  "), (Tokens{"u", "s", "based", "firm", "2024"}));
  EXPECT_EQ(ftx::rouge_tokenize("na\xc3\xafve caf\xc3\xa9"), (Tokens{"na", "ve", "caf"}));  // naïve café
  // Python's lower(): U+0130 is "i" + a combining dot (which separates), U+212A is "k".
  EXPECT_EQ(ftx::rouge_tokenize("\xc4\xb0stanbul"), (Tokens{"i", "stanbul"}));
  EXPECT_EQ(ftx::rouge_tokenize("\xe2\x84\xaa" "elvin"), (Tokens{"kelvin"}));
  EXPECT_EQ(ftx::rouge_tokenize("\xff" "ab\xc4"), (Tokens{"ab"}));  // invalid UTF-8 separates
  EXPECT_TRUE(ftx::rouge_tokenize("").empty());
  EXPECT_TRUE(ftx::rouge_tokenize("-- !! --").empty());
}

TEST(Rouge, NgramsClipCountsByTheOtherText) {
  const Tokens t = ftx::rouge_tokenize("the cat sat on the mat");
  const Tokens p = ftx::rouge_tokenize("the cat on the mat");
  expect_score(ftx::rouge_n(t, p, 1), 5.0 / 5, 5.0 / 6);  // the x2, cat, on, mat
  expect_score(ftx::rouge_n(t, p, 2), 3.0 / 4, 3.0 / 5);  // the cat, on the, the mat
  // A word repeated in the prediction counts as often as the target has it.
  expect_score(ftx::rouge_n(Tokens{"a", "b"}, Tokens{"a", "a", "a"}, 1), 1.0 / 3, 1.0 / 2);
  expect_score(ftx::rouge_n(Tokens{"a"}, Tokens{"b"}, 1), 0, 0);
  expect_score(ftx::rouge_n(Tokens{"a"}, Tokens{"a"}, 2), 0, 0);  // no bigrams at all
  expect_score(ftx::rouge_n(Tokens{}, Tokens{}, 1), 0, 0);
  EXPECT_THROW(ftx::rouge_n(t, p, 0), ftx::Error);
}

TEST(Rouge, LIsTheLongestCommonSubsequence) {
  expect_score(ftx::rouge_l(ftx::rouge_tokenize("the cat sat on the mat"), ftx::rouge_tokenize("the cat on the mat")),
               5.0 / 5, 5.0 / 6);
  expect_score(ftx::rouge_l(Tokens{"a", "b", "c", "d"}, Tokens{"d", "c", "b", "a", "x"}), 1.0 / 5, 1.0 / 4);
  expect_score(ftx::rouge_l(Tokens{"a"}, Tokens{}), 0, 0);
}

TEST(Rouge, LsumIsTheUnionLcsOfTheSentences) {
  // Lin (2004), section 3.2: r = w1..w5, c1 = w1 w2 w6 w7 w8, c2 = w1 w3 w8 w9 w5: the union LCS
  // of r is w1 w2 w3 w5, 4 hits of 5 reference and 10 candidate tokens.
  expect_score(ftx::rouge_lsum("w1 w2 w3 w4 w5", "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5"), 4.0 / 10, 4.0 / 5);
  // Hits are clipped by the counts of both texts: "a" is in the candidate once.
  expect_score(ftx::rouge_lsum("a a\na", "a"), 1.0 / 1, 1.0 / 3);
  // Of the two LCSs of "a b" and "b a", rouge_score's backtrack takes "a", which leaves the
  // candidate's "b" for the second reference sentence: 2 hits (the other choice would give 1).
  expect_score(ftx::rouge_lsum("a b\nb", "b a"), 2.0 / 2, 2.0 / 3);
  // Only "\n" splits; empty lines are dropped; without newlines it is ROUGE-L.
  expect_score(ftx::rouge_lsum("\n\na b c\n", "c b a d"), 1.0 / 4, 1.0 / 3);
  expect_score(ftx::rouge_lsum("", "a"), 0, 0);
  expect_score(ftx::rouge_lsum("a", "\n !\n"), 0, 0);
}

TEST(Rouge, ScoresTakeTheReferenceAsTarget) {
  const ftx::RougeScores s = ftx::rouge_scores("The cat sat.\nOn the mat", "the cat is on the mat");
  expect_score(s.rouge1, 5.0 / 6, 5.0 / 6);
  expect_score(s.rouge2, 3.0 / 5, 3.0 / 5);
  expect_score(s.rougeL, 5.0 / 6, 5.0 / 6);
  expect_score(s.rougeLsum, 5.0 / 6, 5.0 / 6);  // "the cat" + "on the mat"
  const ftx::RougeScores empty = ftx::rouge_scores("a reference", "");
  expect_score(empty.rouge1, 0, 0);
  expect_score(empty.rougeLsum, 0, 0);
}

TEST(SummarizePrompt, IsSummarizePysTextStrippedWithItsNtJoin) {
  EXPECT_EQ(ftx::summarize_prompt("  He did n't go.\n"), "He didn't go.\n TL;DR:");
  EXPECT_EQ(ftx::summarize_prompt(""), "TL;DR:");
  EXPECT_EQ(ftx::summarize_prompt("a\xc2\xa0"), "a\xc2\xa0 TL;DR:");  // inner white space stays
  EXPECT_EQ(ftx::summarize_prompt("\xe3\x80\x80x"), "x TL;DR:");      // U+3000 is Python white space
}

TEST(SummarizePrompt, IdsAreCutToTheFirstMaxInputLength) {
  const auto tok = ftx::load_tokenizer(ftx_test::gpt2_dir());
  const std::string article = "The quick brown fox jumps over the lazy dog.";
  const std::vector<int32_t> all = tok->encode(ftx::summarize_prompt(article));
  ASSERT_GT(all.size(), 5u);
  EXPECT_EQ(ftx::summarize_prompt_ids(article, *tok, 1000), all);
  EXPECT_EQ(ftx::summarize_prompt_ids(article, *tok, 5), std::vector<int32_t>(all.begin(), all.begin() + 5));
  EXPECT_EQ(tok->decode(all), "The quick brown fox jumps over the lazy dog. TL;DR:");
}

}  // namespace
