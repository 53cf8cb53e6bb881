#pragma once
// Summarization evaluation as TensorRT-LLM's examples/summarize.py runs it on cnn_dailymail
// (docs/runtime.md#summarization): each article becomes a prompt ending in " TL;DR:", the model's
// continuation is the summary, scored against the reference (the "highlights") with ROUGE
// (lib/eval/rouge.h). The decoding itself is the scheduler's (ftx eval-summarize).
#include <cstdint>
#include <string>
#include <vector>

#include "lib/eval/rouge.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

struct SummarizeExample {
  std::string article, reference;
};

// Reads JSON lines ("-": standard input), each an object whose `input_key` (cnn_dailymail:
// "article") and `output_key` ("highlights") are strings; blank lines are skipped; at most
// max_examples (0: all). Errors name the file and line: malformed JSON, a missing or non-string
// field, no examples at all.
std::vector<SummarizeExample> read_summarize_jsonl(const std::string& path, const std::string& input_key,
                                                   const std::string& output_key, int64_t max_examples);

// summarize.py's prompt text: (article + " TL;DR: ").strip() with every " n't" made "n't".
std::string summarize_prompt(const std::string& article);

// The prompt's ids: tokenized as `ftx generate` tokenizes text (no special ids added) and cut to
// its first max_input_length ids (transformers' truncation=True, max_length: the suffix is lost
// from a long article, as in summarize.py).
std::vector<int32_t> summarize_prompt_ids(const std::string& article, const Tokenizer& tok, int64_t max_input_length);

struct SummarizeResult {
  int64_t index = 0;
  std::string summary, reference;
  RougeScores rouge;  // target: the reference, prediction: the summary
  std::string error;  // result_error(): the decoding failed (the summary is what came before)
};

// One result as a JSON line: index, summary, reference, rouge1, rouge2, rougeL, rougeLsum
// (F-measures in [0, 1]), and "error" when there is one; and back (--resume reads the kept ones).
std::string summarize_result_json(const SummarizeResult& r);
SummarizeResult summarize_result_from_json(const std::string& line, const std::string& where);

// Means of the F-measures over the examples, in percent as summarize.py prints them (the plain
// mean, where evaluate's default bootstrap aggregation reports the median of 1000 resampled means:
// the same up to its sampling noise).
struct SummarizeTotals {
  int64_t examples = 0;
  double rouge1 = 0, rouge2 = 0, rougeL = 0, rougeLsum = 0;  // sums of F-measures
  void add(const RougeScores& s);
  double mean_percent(double sum) const { return examples ? sum / static_cast<double>(examples) * 100 : 0.0; }
  // summarize.py's lines, "[INFO] rouge1: 21.869322054781037" and so on (Python's repr of the
  // mean x 100), each with its newline.
  std::string report() const;
  // summarize.py --check_accuracy: the mean ROUGE-1 x 100 is strictly above the threshold; the
  // message when it is not.
  bool passes(double rouge1_threshold) const;
  std::string threshold_failure(double rouge1_threshold) const;
};

}  // namespace ftx
