#pragma once
// GPT-2's byte-level BPE (openai/gpt-2 encoder.py), from vocab.json + merges.txt: text is split by
// Gpt2PreTokenizer, each piece's bytes are spelled with GPT-2's bytes_to_unicode alphabet, and the
// merges are applied by rank. Every byte has a token, so any input encodes; decoding gives the
// original bytes back. `<|endoftext|>` in the text is ordinary text, never the special id.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/tokenizer/piece_cache.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  // Throws ftx::Error naming the file and the offending entry for unreadable or inconsistent files.
  Gpt2BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_txt_path);

  std::vector<int32_t> encode(std::string_view utf8) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(tokens_.size()); }
  std::string id_to_token(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return end_of_text_; }
  std::optional<int32_t> eos_id() const override { return end_of_text_; }
  std::string kind() const override { return "gpt2-bpe"; }
  std::string source() const override { return vocab_path_ + " + " + merges_path_; }

  // The BPE of one pre-tokenized piece (exposed for tests).
  std::vector<int32_t> encode_piece(std::string_view piece) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // load_vocab returns spelling -> id, which load_merges needs and nothing needs afterwards.
  std::unordered_map<std::string, int32_t> load_vocab();
  void load_merges(const std::unordered_map<std::string, int32_t>& token_to_id);
  void bpe(std::vector<int32_t>* symbols) const;
  void append_piece(std::string_view piece, std::vector<int32_t>* out) const;
  void check_id(int32_t id) const;

  std::string vocab_path_, merges_path_;
  std::vector<std::string> tokens_;       // id -> spelling in vocab.json ("" for unused ids)
  std::vector<std::string> token_bytes_;  // id -> the bytes it stands for
  std::vector<bool> has_token_;
  int32_t byte_ids_[256];                                 // byte -> id of its one-byte token
  std::unordered_map<uint64_t, Merge> merges_;            // (left id, right id) -> rank, result
  std::optional<int32_t> end_of_text_;

  // encoder.py's cache of piece -> ids, bounded here.
  mutable std::mutex cache_mutex_;
  mutable PieceCache cache_;
};

}  // namespace ftx
