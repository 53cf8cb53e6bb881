#pragma once
// A tokenizer turns UTF-8 text into model token ids and back. Two kinds exist: GPT-2's byte-level
// BPE (vocab.json + merges.txt; GPT-2, GPT-J, Megatron GPT) and SentencePiece (tokenizer.model;
// NeMo GPT-Next). `load_tokenizer` picks one by looking at the files in a model folder.
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
  // "gpt2-bpe" or "sentencepiece", for messages.
  virtual std::string kind() const = 0;
  // The file(s) it was loaded from, for messages.
  virtual std::string source() const = 0;
};

// Loads the tokenizer in `dir`, which is a model folder or a SentencePiece .model file. Looks for,
// in this order: vocab.json + merges.txt (GPT-2 BPE); tokenizer.model (SentencePiece); then the
// names converters write with prefixes: exactly one *vocab*.json with exactly one *merge*.txt, or
// exactly one *.model. Throws ftx::Error naming the folder and what was looked for.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace ftx
