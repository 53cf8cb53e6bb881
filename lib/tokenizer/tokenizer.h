#pragma once
// A tokenizer turns UTF-8 text into model token ids and back. Four kinds exist: GPT-2's byte-level
// BPE (vocab.json + merges.txt; GPT-2, GPT-J, Megatron GPT), HuggingFace tokenizer.json files of
// BPE models (byte-level: GPT-NeoX, BLOOM, Llama 3, Qwen2; SentencePiece-style: Llama 2, Mistral),
// XGLM's SentencePiece model with fairseq's id order (sentencepiece.bpe.model) and SentencePiece
// (tokenizer.model; Llama 2, Mistral, NeMo GPT-Next). `load_tokenizer` picks one by looking at the
// files in a model folder.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ftx {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text to ids. Any byte string is accepted, valid UTF-8 or not (GPT-2 falls back to bytes).
  virtual std::vector<int32_t> encode(std::string_view utf8) const = 0;
  // Ids to text. The result may be invalid UTF-8 when the ids split a character (GPT-2 BPE).
  // Throws ftx::Error naming the first id outside [0, vocab_size()) or with no token.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;

  virtual int32_t vocab_size() const = 0;
  // The token's spelling as stored in the vocabulary (GPT-2: byte-to-unicode form, e.g. "Ġthe").
  virtual std::string id_to_token(int32_t id) const = 0;
  // Special ids where the vocabulary has them.
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  // "gpt2-bpe", "hf-bpe", "xglm-sentencepiece" or "sentencepiece", for messages.
  virtual std::string kind() const = 0;
  // The file(s) it was loaded from, for messages.
  virtual std::string source() const = 0;
  // The folder of those files, where tokenizer_config.json and a chat template would be.
  virtual std::string folder() const = 0;
};

// Loads the tokenizer in `dir`, which is a model folder, or one file: a SentencePiece .model
// (named sentencepiece.bpe.model: XGLM's) or a tokenizer.json. In a folder it looks for, in this
// order, and takes the first found:
//   1. vocab.json + merges.txt, or exactly one *vocab*.json with exactly one *merge*.txt (GPT-2 BPE);
//   2. sentencepiece.bpe.model (XGLM: SentencePiece with fairseq's id order, XglmTokenizer);
//   3. tokenizer.json (HfBpeTokenizer), when ftx reads its kind; if it does not and tokenizer.model
//      is there, that one instead;
//   4. tokenizer.model (SentencePiece, SentencePieceTokenizer);
//   5. exactly one *.model (SentencePiece, as converters and NeMo archives name it).
// GPT-2's files come before tokenizer.json because encoder.py is their definition (and they
// differ on "<|endoftext|>" in text). tokenizer.json comes before tokenizer.model because
// transformers' AutoTokenizer uses it (the fast tokenizer), and Llama 2's and Mistral's differ from
// their tokenizer.model (the slow LlamaTokenizer) on leading spaces and runs of spaces.
// Throws ftx::Error naming the folder and what was looked for.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace ftx
