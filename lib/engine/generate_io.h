#pragma once
// The files of `ftx generate`: prompt inputs streamed as requests (FT start_ids CSV, text lines,
// JSON lines with per-request parameters), FT-style word lists, and the JSON-lines results.
// Kept out of cmd/ so tests can call them.
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "formats/input_file.h"
#include "formats/output_file.h"
#include "lib/engine/prompt_tables.h"
#include "lib/engine/scheduler.h"
#include "lib/engine/soft_prompt.h"
#include "lib/model/rope_scaling.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

// FT word_list.py: the string is one CSV record (csv.reader: commas, "quoted, fields", "" escapes);
// each word is tokenised on its own. Empty words are skipped.
std::vector<std::string> split_csv_record(const std::string& s);
std::vector<std::vector<int32_t>> parse_word_list(const std::string& csv, const Tokenizer& tok);

// What every request starts from (the flags); a JSON line may override the per-request fields.
struct RequestDefaults {
  int64_t max_new_tokens = 0;
  SamplingConfig sampling;
  ResultOptions output;
  int32_t start_id = -1;  // >= 0: an empty prompt starts from this id (FT's max_in = 0 case); a JSON line's "start_id" overrides it
};

// What a prompt may not exceed.
struct PromptLimits {
  int64_t vocab_size = 0;
  int64_t max_positions = 0;  // learned/sinusoidal position tables: prompt + new tokens; 0: none
  int64_t sliding_window = 0;  // config.ini sliding_window (sliding_window.h); 0: none
  int64_t memory_len = 0;      // --memory-len (0: none)
  RopeScaling rope_scaling;    // longrope: positions beyond its original length are refused (rope_scaling.h)
  int64_t hidden = 0;          // soft prompts' row width (soft_prompt.h); 0: none are read
};

enum class PromptFormat {
  kStartIdsCsv,  // FT start_ids.csv: one prompt per line, comma-separated ids
  kText,         // one prompt per line, or JSON lines (when the first non-blank line starts with '{'),
                 // or one JSON array of request objects or text strings (when it starts with '[{',
                 // '["' or a lone '['); a UTF-8 byte-order mark before any of them is skipped
};

// The JSON-line fields a request may carry besides "text" or "ids".
const std::vector<std::string>& request_fields();

// Streams requests from a prompt file ("-": standard input; "": none, only add_prompts' texts) one
// line at a time, so memory does not grow with the input. Every error names the file, the line and the prompt number: an id outside
// the vocabulary, an empty prompt (without start_id), a prompt too long for the position table or
// (outside sessions, whose positions start after their context) for a sliding window without
// --memory-len,
// a malformed or unknown JSON field, a value outside FT's range (check_decode_request).
// A final empty line is ignored. An end_id outside the vocabulary is a warning (once per value):
// FT runs such requests, they simply never stop on it.
class PromptReader : public RequestSource {
 public:
  PromptReader(const std::string& path, PromptFormat format, const Tokenizer* tokenizer, RequestDefaults defaults,
               PromptLimits limits);
  // generate's --prompt TEXT: each text one prompt (the whole string, never JSON), read before the
  // file's, so they take the first indices in the order given.
  void add_prompts(std::vector<std::string> texts) { flag_prompts_ = std::move(texts); }
  const Request* peek() override;
  Request take() override;
  // p-tuning (prompt_tables.h): each request's task is its JSON "task" (a name or an id; null for
  // none), else default_task (-1: none). "virtual_tokens": N prepends the task's first N virtual
  // ids (start_id .. start_id + N - 1); ids may also give them explicitly (FT's way). Virtual ids
  // are checked against the task's table and rewritten to engine ids. A request with a soft prompt
  // (soft_prompt.h) runs without a task, as FT ignores task ids then: "task" and "virtual_tokens"
  // are refused with it and default_task is not applied.
  void set_prompt_tables(const PromptTables* tables, int64_t default_task) {
    prompts_ = tables;
    default_task_ = default_task;
  }

 private:
  struct PromptChoice {
    bool has_task = false;
    std::string task;          // "" with has_task: JSON null, no task
    int64_t virtual_tokens = 0;
    std::optional<int32_t> start_id;  // the JSON line's "start_id"
    SoftPrompt soft;           // request_prompt_type 1 (soft_prompt.h)
  };
  bool read_next();
  Request parse_json(const std::string& line, const std::string& where, PromptChoice& prompt);
  void apply_prompt(Request& r, const PromptChoice& c, const std::string& where) const;

  std::unique_ptr<LineReader> in_;  // null: no file
  std::string name_;                // the file's name in errors ("--prompt" without one)
  std::vector<std::string> flag_prompts_;
  size_t flag_next_ = 0;
  PromptFormat format_;
  bool format_known_ = false;  // kText: whether json_lines_ was decided (first non-blank line)
  bool json_lines_ = false;
  bool json_array_ = false;    // kText: the file is one JSON array; its elements are the requests
  std::vector<std::string> array_items_;  // each element as JSON text
  size_t array_next_ = 0;
  bool read_json_array(std::string first_line);
  const Tokenizer* tok_;
  RequestDefaults defaults_;
  PromptLimits limits_;
  int64_t next_index_ = 0;
  bool have_ = false, at_end_ = false;
  Request next_;
  std::set<int32_t> warned_end_ids_;
  const PromptTables* prompts_ = nullptr;
  int64_t default_task_ = -1;
  int64_t next_soft_id_ = -1;  // the next soft prompt's first id (-1: soft_prompt_first_id, at the first)
};

// What PromptReader checks of each request, for requests made elsewhere (eval-summarize): ids in
// the vocabulary (or the request's virtual range), the prompt and its new tokens within the position
// table, a sliding window and longrope's original length, FT's parameter rules. Error prefixed with
// `where`.
void check_prompt_request(const Request& r, const PromptLimits& limits, const std::string& where);

// The fingerprint --resume compares: the prompt ids and every resolved parameter of the request.
uint64_t request_fingerprint(const Request& r);

// --resume: consumes the first journal.resumed() requests of `source`, checking each against the
// fingerprint of the record OUT.partial holds for it. Error naming the input and the prompt when
// one differs or the input has fewer prompts (the input or the options changed). Sessions whose
// rounds were among them continue: their contexts (each round's tokens and output_ids) go to
// `scheduler` (rank 0).
void skip_resumed(RequestSource& source, const ResultJournal& journal, const std::string& input_name,
                  Scheduler* scheduler = nullptr);

// What identifies a model folder's contents for --resume: a hash of config.ini and manifest.json.
std::string model_identity(const std::string& model_dir);

struct ResultFormat {
  const Tokenizer* tokenizer = nullptr;  // adds "text" when set
};
// A result's "text": `ids` decoded without their trailing end_ids (ids past the tokenizer's
// vocabulary, a padded model vocabulary's, left out), invalid UTF-8 replaced by U+FFFD.
std::string result_text(const Tokenizer& tok, const std::vector<int32_t>& ids, int32_t end_id);
// One result line (no trailing newline). sequence_length = input_length + new tokens (the
// compacted length; FT's own counter would also count a short row's padding). Beams (more than
// one) add "beams", best first. A failed request (result_error) adds "error".
std::string result_json(const GenerationOutput& out, const ResultFormat& fmt);
// Why a request failed, naming it, or "" when it did not: it was refused before it ran
// (GenerationOutput::error), or its logits were not finite at a step (FinishReason::kNonFiniteLogits
// on a beam; the step is named).
std::string result_error(const GenerationOutput& out);
// One streaming line: {"index", "step", "token"[, "text"][, "output_ids" (beams)]}.
std::string stream_json(const StreamEvent& ev, const Tokenizer* tokenizer);

}  // namespace ftx
