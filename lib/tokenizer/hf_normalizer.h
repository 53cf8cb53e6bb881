#pragma once
// The normalizers of HuggingFace tokenizer.json files that ftx reads: null, NFC, NFD, NFKC, NFKD
// (done with ICU), Prepend (a string put in front of non-empty text), Replace with a String
// pattern (every occurrence, left to right), and a Sequence of them (Llama 2's and Mistral's
// tokenizer.json: Prepend "▁", then Replace " " by "▁"). Others (Lowercase, Replace with a Regex,
// Precompiled, BertNormalizer, ...) are an ftx::Error naming them. Bytes that are not valid UTF-8
// are kept as they are, and the valid text between them is normalized on its own (tokenizers never
// sees such bytes; Python's unicodedata treats the surrogateescape characters that stand for them
// as unchanged starters).
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>


namespace ftx {

class HfNormalizer {
 public:
  // `spec` is tokenizer.json's "normalizer" value; `path` names the file in errors.
  HfNormalizer(const nlohmann::json& spec, const std::string& path);
  bool is_identity() const { return steps_.empty(); }
  std::string normalize(std::string_view text) const;

 private:
  struct Step {
    const void* form = nullptr;  // an icu::Normalizer2, or null for Prepend / Replace
    std::string from, to;        // Replace `from` by `to`; Prepend: from empty, `to` in front
  };
  void add(const nlohmann::json& spec, const std::string& path);
  std::vector<Step> steps_;  // applied in order
};

}  // namespace ftx
