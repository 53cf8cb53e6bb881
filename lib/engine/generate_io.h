#pragma once
// The files of `ftx generate`: prompt inputs (FT start_ids CSV, text lines, JSONL {"text"}),
// FT-style word lists, and the JSON-lines results. Kept out of cmd/ so tests can call them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/engine/generator.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

// FT start_ids.csv: one prompt per line, comma-separated ids (spaces allowed). A final empty line
// is ignored; other empty lines are empty prompts (rejected later by check_prompts).
std::vector<std::vector<int32_t>> read_start_ids_csv(const std::string& path);

// Text prompts: JSON lines {"text": "..."} when the first non-blank line starts with '{', else one
// prompt per line (a trailing "\r" is dropped; a final empty line is ignored).
std::vector<std::string> read_text_prompts(const std::string& path);

// FT word_list.py: the string is one CSV record (csv.reader: commas, "quoted, fields", "" escapes);
// each word is tokenised on its own. Empty words are skipped.
std::vector<std::string> split_csv_record(const std::string& s);
std::vector<std::vector<int32_t>> parse_word_list(const std::string& csv, const Tokenizer& tok);

// Errors naming `origin` and the 1-based prompt number: an empty prompt, an id outside
// [0, vocab), or (learned positions, max_pos > 0) prompt + max_new_tokens beyond max_pos_seq_len.
void check_prompts(const std::vector<std::vector<int32_t>>& prompts, const std::string& origin,
                   int64_t vocab, int64_t max_new_tokens, int64_t max_pos_seq_len);

struct ResultFormat {
  int32_t end_id = -1;
  int64_t beam_width = 1;
  bool log_probs = false;      // output_log_probs
  bool cum_log_probs = false;  // cum_log_prob
  bool context_embedding = false;
  const Tokenizer* tokenizer = nullptr;  // adds "text" when set
};
// One result line (no trailing newline). sequence_length = input_length + new tokens (the
// compacted length; FT's own counter would also count a short row's padding).
std::string result_json(int64_t index, const GenerationOutput& out, const ResultFormat& fmt);
// One streaming line: {"index", "step", "token"[, "text"][, "output_ids" (beams)]}.
std::string stream_json(const StreamEvent& ev, const Tokenizer* tokenizer);

}  // namespace ftx
