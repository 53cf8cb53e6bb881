#pragma once
// The Unicode normalizers of HuggingFace tokenizer.json files: null, NFC, NFD, NFKC, NFKD, or a
// Sequence of them, done with ICU. Others (Lowercase, Replace, Precompiled, BertNormalizer, ...)
// are an ftx::Error naming them. Bytes that are not valid UTF-8 are kept as they are, and the
// valid text between them is normalized on its own (tokenizers never sees such bytes; Python's
// unicodedata treats the surrogateescape characters that stand for them as unchanged starters).
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>


namespace ftx {

class HfNormalizer {
 public:
  // `spec` is tokenizer.json's "normalizer" value; `path` names the file in errors.
  HfNormalizer(const nlohmann::json& spec, const std::string& path);
  bool is_identity() const { return forms_.empty(); }
  std::string normalize(std::string_view text) const;

 private:
  void add(const nlohmann::json& spec, const std::string& path);
  std::vector<const void*> forms_;  // icu::Normalizer2 instances, applied in order
};

}  // namespace ftx
