#pragma once
// GPT-2's byte-level BPE (openai/gpt-2 encoder.py), from vocab.json + merges.txt: text is split by
// Gpt2PreTokenizer, each piece's bytes are spelled with GPT-2's bytes_to_unicode alphabet, and the
// merges are applied by rank. Every byte has a token, so any input encodes; decoding gives the
// original bytes back. `<|endoftext|>` in the text is ordinary text, never the special id.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/tokenizer/byte_level_bpe.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  // Throws ftx::Error naming the file and the offending entry for unreadable or inconsistent files.
  Gpt2BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_txt_path);

  std::vector<int32_t> encode(std::string_view utf8) const override;
  std::string decode(const std::vector<int32_t>& ids) const override { return bpe_->decode(ids); }
  int32_t vocab_size() const override { return bpe_->vocab_size(); }
  std::string id_to_token(int32_t id) const override { return bpe_->id_to_token(id); }
  std::optional<int32_t> bos_id() const override { return end_of_text_; }
  std::optional<int32_t> eos_id() const override { return end_of_text_; }
  std::string kind() const override { return "gpt2-bpe"; }
  std::string source() const override { return vocab_path_ + " + " + merges_path_; }
  std::string folder() const override;
  const std::string& vocab_path() const { return vocab_path_; }
  const std::string& merges_path() const { return merges_path_; }

 private:
  void load_merges();

  std::string vocab_path_, merges_path_;
  std::unique_ptr<ByteLevelBpe> bpe_;
  std::optional<int32_t> end_of_text_;
};

}  // namespace ftx
