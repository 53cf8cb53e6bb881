#pragma once
// The pre-tokenizers of HuggingFace tokenizer.json files that byte-level BPE models use, as the
// `tokenizers` library defines them (GPT-2's and BLOOM's patterns by hand, others through ICU):
//   ByteLevel {add_prefix_space, use_regex}: with use_regex, each piece is split with GPT-2's
//     pattern (Gpt2PreTokenizer); with add_prefix_space, a space is put in front of each piece that
//     reaches it and does not start with one. It must come last: its byte spelling is what BPE takes.
//   Split {pattern: {"String": S}, behavior: any, invert: any}: the occurrences of S split the
//     piece as the behavior says (split_behavior.h; Gemma's tokenizer.json: " ", MergedWithPrevious).
//     A Regex pattern (below) other than a ' ?[^SET]+' one takes any behavior and invert too
//     (tiktoken-style files: Removed with invert: true, which keeps the matches as pieces).
//   Split {pattern: {"Regex": P}, behavior: "Isolated", invert: false}: the matches of P and the
//     text between them become pieces. P is GPT-2's pattern, or one of the form ` ?[^SET]+` or
//     `[^SET]+` (BLOOM: ` ?[^(\s|[.,!?…。，、।۔،])]+`), where SET lists literal characters,
//     escaped punctuation, `\s` (Unicode White_Space) and nested `[...]` lists of literals; inside
//     a class, `(`, `|` and `)` are literal characters, as in Oniguruma and Python `regex` V1.
//     Any other P (Llama 3's, Qwen2's) is a general regular expression (RegexSplit, ICU).
//   Metaspace {replacement, prepend_scheme, split} (SentencePiece-style BPE: Llama 2's and Mistral's
//     tokenizer.json): spaces become the replacement ("▁"); it is put in front of a piece that
//     does not start with it always, or only of the piece at the very start of the text ("first",
//     so none after a special token), or never; with split, a piece is cut before each "▁".
//   Sequence {pretokenizers: [...]}: each one splits the pieces of the one before.
// Anything else is an ftx::Error naming the pre-tokenizer or pattern. A null spec splits nothing.
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ftx {

class HfPreTokenizer {
 public:
  // `spec` is tokenizer.json's "pre_tokenizer" value; `path` names the file in errors.
  HfPreTokenizer(const nlohmann::json& spec, const std::string& path);
  ~HfPreTokenizer();
  HfPreTokenizer(HfPreTokenizer&&) noexcept;

  // Appends the pieces of `text` to `pieces`, in order. Without add_prefix_space and Metaspace they
  // cover `text` exactly. Bytes that are not valid UTF-8 are characters of their own that no class
  // excludes. `at_start`: `text` begins the whole text (Metaspace's "first" scheme).
  void split(std::string_view text, std::vector<std::string>* pieces, bool at_start = true) const;
  // It has a ByteLevel step (the byte-level BPE models' pre-tokenizer).
  bool byte_level() const { return have_byte_level_; }

  // One splitting step; public so the .cc's helpers can name it.
  struct Step;

 private:
  void add(const nlohmann::json& spec, const std::string& path);

  std::vector<std::unique_ptr<Step>> steps_;
  bool have_byte_level_ = false;
  bool add_prefix_space_ = false;
};

}  // namespace ftx
