#pragma once
// ROUGE as Google's rouge_score computes it (the package Hugging Face evaluate's "rouge" metric
// runs, and so TensorRT-LLM's summarize.py), with its defaults: the default tokenizer without a
// stemmer, and ROUGE-Lsum's sentences split on "\n". Scores are (precision, recall, F-measure) with
// F = 2PR / (P + R), 0 when P + R is 0; the arithmetic is rouge_score's, operation for operation,
// so the doubles are the same.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ftx {

// rouge_score's tokenize(): Python's str.lower(), every run of characters other than [a-z0-9]
// a separator, the runs the tokens. Of the characters outside ASCII only two lower-case to ASCII
// letters: U+0130 (to "i" and a combining dot, so it ends its token after the "i") and U+212A
// KELVIN SIGN (to "k"). Any other non-ASCII character, and any byte of invalid UTF-8, separates.
std::vector<std::string> rouge_tokenize(std::string_view text);

struct RougeScore {
  double precision = 0, recall = 0, fmeasure = 0;
};

// ROUGE-N: n-gram counts of the target (reference) and the prediction, the overlap sum of min
// counts; P = overlap / max(prediction n-grams, 1), R = overlap / max(target n-grams, 1). n >= 1.
RougeScore rouge_n(const std::vector<std::string>& target, const std::vector<std::string>& prediction, int n);

// ROUGE-L: the longest common subsequence of the token lists; P = LCS / |prediction|,
// R = LCS / |target|; 0 when either is empty.
RougeScore rouge_l(const std::vector<std::string>& target, const std::vector<std::string>& prediction);

// ROUGE-Lsum, the summary-level LCS of ROUGE-1.5.5 as rouge_score's _summary_level_lcs has it: each
// text is split on "\n" (empty pieces dropped) into sentences, each tokenized; for every target
// sentence the union of one LCS with each prediction sentence (rouge_score's backtrack, whose
// choice among equally long LCSs decides the union) gives tokens, each a hit while both texts still
// have an unused count of it. P = hits / prediction tokens, R = hits / target tokens.
RougeScore rouge_lsum(std::string_view target, std::string_view prediction);

struct RougeScores {
  RougeScore rouge1, rouge2, rougeL, rougeLsum;
};
// All four, as rouge_score's RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"]).score(target,
// prediction).
RougeScores rouge_scores(std::string_view target, std::string_view prediction);

}  // namespace ftx
