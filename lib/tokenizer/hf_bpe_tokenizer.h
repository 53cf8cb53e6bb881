#pragma once
// BPE models stored as a HuggingFace `tokenizers` file (tokenizer.json), of two kinds, told apart
// by the decoder:
//   byte-level BPE (decoder ByteLevel): GPT-NeoX, BLOOM, Llama 3, Qwen2, and any GPT-2-like model
//     saved by a "fast" tokenizer (ByteLevelBpe, shared with GPT-2);
//   SentencePiece-style BPE (decoder Sequence [Replace "▁" by " ", ByteFallback, Fuse, Strip]):
//     Llama 2 and Mistral, as transformers' LlamaConverter writes them, with a Prepend/Replace
//     normalizer (legacy) or a Metaspace pre-tokenizer (CharBpe).
// Encoding follows the tokenizers library, in its order:
//   1. added_tokens (special or not) are found in the text and become their ids; first those with
//      "normalized": false, in the raw text, then, after normalization, those with "normalized":
//      true. At each position the longest one wins, leftmost first (tokenizers' Aho-Corasick,
//      LeftmostLongest). So "<|endoftext|>" in a NeoX text IS the special id, unlike GPT-2's
//      vocab.json + merges.txt (encoder.py). lstrip / rstrip / single_word act as tokenizers' do
//      (AddedTokenMatcher::split_like_tokenizers: Phi-3's rstrip tokens eat the white space after them).
//   2. the rest is normalized (HfNormalizer), each piece between added tokens on its own, and
//      pre-tokenized (HfPreTokenizer; Metaspace's "first" is the piece at the text's start);
//   3. each piece is merged with the BPE model.
// No special ids are added around the text (the post_processor is not applied). Decoding is the
// file's decoder; added tokens decode to their content.
// bos_id()/eos_id() come from tokenizer_config.json or special_tokens_map.json next to the file
// when they name them, else from the added special tokens <s> / </s> or <|endoftext|>.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/tokenizer/added_tokens.h"
#include "lib/tokenizer/bpe_model.h"
#include "lib/tokenizer/hf_normalizer.h"
#include "lib/tokenizer/hf_pretokenizer.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

class HfBpeTokenizer : public Tokenizer {
 public:
  // Throws ftx::Error naming the file and the unsupported or inconsistent part.
  explicit HfBpeTokenizer(const std::string& tokenizer_json_path);
  ~HfBpeTokenizer() override;

  std::vector<int32_t> encode(std::string_view utf8) const override;
  std::string decode(const std::vector<int32_t>& ids) const override { return bpe_->decode(ids); }
  int32_t vocab_size() const override { return bpe_->vocab_size(); }
  std::string id_to_token(int32_t id) const override { return bpe_->id_to_token(id); }
  std::optional<int32_t> bos_id() const override { return bos_; }
  std::optional<int32_t> eos_id() const override { return eos_; }
  // "hf-bpe" (byte-level) or "hf-sentencepiece-bpe".
  std::string kind() const override { return byte_level_ ? "hf-bpe" : "hf-sentencepiece-bpe"; }
  std::string source() const override { return path_; }
  std::string folder() const override;

 private:
  void load_model(const nlohmann::json& model);
  void load_added_tokens(const nlohmann::json& added);
  void find_special_ids();
  void encode_normalized_piece(std::string_view text, bool at_start, std::vector<int32_t>* out) const;
  void encode_text(std::string_view text, bool at_start, std::vector<int32_t>* out) const;

  std::string path_;
  bool byte_level_ = true;
  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<HfNormalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
  std::vector<AddedToken> added_;
  AddedTokenMatcher raw_tokens_, normalized_tokens_;
  std::optional<int32_t> bos_, eos_;
};

}  // namespace ftx
