#pragma once
// SentencePiece models (tokenizer.model), as Llama 2, Mistral and NeMo GPT-Next use, through
// Debian's libsentencepiece. Beside a HuggingFace tokenizer_config.json or special_tokens_map.json
// (a HF folder, as Llama 2's and Mistral's repos ship) text is encoded as transformers'
// LlamaTokenizer (the slow one) does:
//   1. The special and added tokens (the model's <unk>, <s>, </s>, and those named in
//      tokenizer_config.json / special_tokens_map.json, with their added_tokens_decoder ids) are
//      found in the text, leftmost-longest, and become their ids; their lstrip / rstrip /
//      single_word flags act on the text beside them as transformers'.
//   2. The text between them goes to SentencePiece, with the model's own normalizer. With
//      tokenizer_config.json's "legacy": false, only the text's start gets the "▁" word-boundary
//      prefix (none after a special token; add_prefix_space: false drops it there too), and "▁"
//      typed in the text is read as a space; otherwise (legacy true or absent, transformers'
//      default) every piece of text between special tokens is encoded on its own, each with the
//      model's dummy prefix.
// A bare model (no such file beside it: NeMo's, spm_train's) is SentencePiece's own encoding, as
// NeMo's tokenizer does: special-token spellings in the text are text. Without special tokens in
// the text, the ids are SentencePiece's either way. No BOS/EOS is added. Decoding is
// SentencePiece's (control pieces decode to nothing); an added token with an id past the model's
// pieces decodes to its content.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/tokenizer/added_tokens.h"
#include "lib/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ftx {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws ftx::Error naming the file when it cannot be read or is not a SentencePiece model, or
  // naming tokenizer_config.json when it is malformed. Without `transformers_tokens`, text is
  // SentencePiece's alone, whatever is beside the model (XglmTokenizer's encoding).
  explicit SentencePieceTokenizer(const std::string& model_path, bool transformers_tokens = true);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view utf8) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override;
  std::string id_to_token(int32_t id) const override;
  std::optional<int32_t> bos_id() const override;
  std::optional<int32_t> eos_id() const override;
  std::string kind() const override { return "sentencepiece"; }
  std::string source() const override { return path_; }
  std::string folder() const override;

 private:
  void add_token(const AddedToken& t);
  void encode_piece(const std::string& text, std::vector<int32_t>* out) const;
  void check_id(int32_t id) const;

  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  // The model with add_dummy_prefix off, as LlamaTokenizer (legacy: false) loads it; null when legacy.
  std::unique_ptr<sentencepiece::SentencePieceProcessor> no_prefix_;
  bool legacy_ = true, add_prefix_space_ = true;
  std::string unk_token_ = "<unk>";  // the prefix LlamaTokenizer encodes in front of text that starts with a space
  size_t unk_length_ = 0;           // its length in ids
  int32_t space_id_ = -1;           // the piece "▁"
  AddedTokenMatcher matcher_;
  std::unordered_map<std::string, AddedToken> added_;  // by content
  std::unordered_map<int32_t, std::string> past_model_;  // added tokens with ids past the model's pieces
  int32_t vocab_size_ = 0;
};

}  // namespace ftx
