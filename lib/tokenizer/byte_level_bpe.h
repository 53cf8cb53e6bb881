#pragma once
// The byte-level BPE model shared by GPT-2's vocab.json + merges.txt (Gpt2BpeTokenizer) and by
// HuggingFace tokenizer.json files of byte-level BPE models (HfBpeTokenizer): a vocabulary whose
// spellings use GPT-2's bytes_to_unicode alphabet, merges applied by rank to the bytes of one
// pre-tokenized piece, and decoding by spelling back to bytes. Pre-tokenization is the caller's.
#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/tokenizer/bpe_model.h"
#include "lib/tokenizer/piece_cache.h"

namespace ftx {

class ByteLevelBpe final : public BpeModel {
 public:
  // With `require_all_bytes`, every one of the 256 byte spellings must be a token; without it, a
  // missing byte is encoded as the unk id (or is an error at encode time when there is none).
  // Throws ftx::Error naming `source` and the bad entry.
  ByteLevelBpe(const nlohmann::json& vocab, std::string source, bool require_all_bytes);

  void set_token(int32_t id, const std::string& spelling) override;
  void append_piece(std::string_view piece, std::vector<int32_t>* out) const override;
  // The bytes the ids stand for.
  std::string decode(const std::vector<int32_t>& ids) const override;

  // GPT-2's bytes_to_unicode(): the character that spells each byte.
  static const std::array<char32_t, 256>& byte_alphabet();
  // The bytes a spelling stands for: its characters mapped back through byte_alphabet(), or, when
  // one of them is outside it, the spelling's own UTF-8 (as tokenizers' ByteLevel decoder does).
  static std::string spelling_to_bytes(const std::string& spelling);

 private:
  void encode_uncached(std::string_view piece, std::vector<int32_t>* ids) const;

  std::vector<std::string> token_bytes_;  // id -> the bytes it stands for
  int32_t byte_ids_[256];                 // byte -> id of its one-byte token, -1 if none

  // encoder.py's cache of piece -> ids, bounded here.
  mutable std::mutex cache_mutex_;
  mutable PieceCache cache_;
};

}  // namespace ftx
