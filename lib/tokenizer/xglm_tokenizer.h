#pragma once
// XGLM's tokenizer (HuggingFace XGLMTokenizer): a SentencePiece BPE model,
// sentencepiece.bpe.model, whose ids are moved to fairseq's dictionary order:
//   model id 0 <s>, 1 <pad>, 2 </s>, 3 <unk>;
//   SentencePiece id p >= 1 is model id p + 1 (fairseq_offset 1), and SentencePiece's <unk> (0)
//   is model id 3;
//   the last 7 ids, n + 1 ... n + 7 for a SentencePiece vocabulary of n pieces, are
//   <madeupword0> ... <madeupword6>; vocab_size() is n + 8.
// Text is encoded by SentencePiece as it is: special-token strings in it are ordinary text (unlike
// SentencePieceTokenizer, which finds them as transformers does; XGLMTokenizer does too). Decoding leaves out <s>, <pad>, </s> and the made-up words, and gives
// <unk> as SentencePiece's unknown surface. bos_id() is <s> (0) and eos_id() </s> (2); note that HF
// starts every XGLM sequence with </s> (2), not <s> (build_inputs_with_special_tokens).
#include <memory>
#include <string>

#include "lib/tokenizer/sentencepiece_tokenizer.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

class XglmTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kBos = 0, kPad = 1, kEos = 2, kUnk = 3;
  static constexpr int32_t kFairseqOffset = 1, kMadeUpWords = 7;

  // Throws ftx::Error naming the file when it cannot be read or is not a SentencePiece model.
  explicit XglmTokenizer(const std::string& model_path);

  std::vector<int32_t> encode(std::string_view utf8) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override { return spm_.vocab_size() + kFairseqOffset + kMadeUpWords; }
  std::string id_to_token(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return kBos; }
  std::optional<int32_t> eos_id() const override { return kEos; }
  std::string kind() const override { return "xglm-sentencepiece"; }
  std::string source() const override { return spm_.source(); }
  std::string folder() const override { return spm_.folder(); }

 private:
  void check_id(int32_t id) const;
  SentencePieceTokenizer spm_;
};

}  // namespace ftx
