#pragma once
// SentencePiece models (tokenizer.model), as NeMo GPT-Next uses, through Debian's libsentencepiece.
// Encoding applies the model's own normalizer, so decode(encode(text)) is the normalized text.
#include <memory>
#include <string>

#include "lib/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ftx {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws ftx::Error naming the file when it cannot be read or is not a SentencePiece model.
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view utf8) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override;
  std::string id_to_token(int32_t id) const override;
  std::optional<int32_t> bos_id() const override;
  std::optional<int32_t> eos_id() const override;
  std::string kind() const override { return "sentencepiece"; }
  std::string source() const override { return path_; }

 private:
  void check_id(int32_t id) const;
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace ftx
