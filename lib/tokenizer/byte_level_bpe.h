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
#include <unordered_map>
#include <vector>

#include "lib/tokenizer/piece_cache.h"

namespace ftx {

class ByteLevelBpe {
 public:
  // `vocab` is a JSON object mapping spellings to ids (vocab.json, or tokenizer.json's model.vocab),
  // read from `source` (named in errors). With `require_all_bytes`, every one of the 256 byte
  // spellings must be a token; without it, a missing byte is encoded as `unk_id` (or is an error
  // at encode time when there is none). Throws ftx::Error naming `source` and the bad entry.
  ByteLevelBpe(const nlohmann::json& vocab, std::string source, bool require_all_bytes);

  // Adds the next merge (its rank is the number of merges added before it). Returns false when
  // left + right is not a token; a merge whose parts are not tokens is kept as a rank but can
  // never apply, as every symbol BPE forms is a token. A later duplicate pair wins.
  bool add_merge(const std::string& left, const std::string& right);
  // Gives `id` the spelling `spelling` for id_to_token and decode (added tokens of tokenizer.json,
  // which need not be in the BPE vocabulary). Does not change how text is merged.
  void set_token(int32_t id, const std::string& spelling);
  // Ids used for bytes with no token (see the constructor).
  void set_unk_id(std::optional<int32_t> id) { unk_id_ = id; }
  // tokenizer.json's `ignore_merges`: a piece whose whole spelling is a token is that token.
  void set_ignore_merges(bool on) { ignore_merges_ = on; }

  // Appends the ids of one pre-tokenized piece (raw bytes, not yet spelled).
  void append_piece(std::string_view piece, std::vector<int32_t>* out) const;
  // The bytes the ids stand for. Throws ftx::Error naming the first id with no token.
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string id_to_token(int32_t id) const;
  // The id of a spelling in the BPE vocabulary.
  std::optional<int32_t> find(const std::string& spelling) const;
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  void check_id(int32_t id) const;

  // GPT-2's bytes_to_unicode(): the character that spells each byte.
  static const std::array<char32_t, 256>& byte_alphabet();
  // The bytes a spelling stands for: its characters mapped back through byte_alphabet(), or, when
  // one of them is outside it, the spelling's own UTF-8 (as tokenizers' ByteLevel decoder does).
  static std::string spelling_to_bytes(const std::string& spelling);

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void grow_to(int32_t id);
  void bpe(std::vector<int32_t>* symbols) const;
  void encode_uncached(std::string_view piece, std::vector<int32_t>* ids) const;

  std::string source_;
  std::vector<std::string> tokens_;       // id -> spelling ("" for unused ids)
  std::vector<std::string> token_bytes_;  // id -> the bytes it stands for
  std::vector<bool> has_token_;
  std::unordered_map<std::string, int32_t> token_to_id_;  // the BPE vocabulary only
  int32_t byte_ids_[256];                                 // byte -> id of its one-byte token, -1 if none
  std::unordered_map<uint64_t, Merge> merges_;            // (left id, right id) -> rank, result
  int32_t next_rank_ = 0;
  std::optional<int32_t> unk_id_;
  bool ignore_merges_ = false;

  // encoder.py's cache of piece -> ids, bounded here.
  mutable std::mutex cache_mutex_;
  mutable PieceCache cache_;
};

// A token spelling quoted for a one-line message (control characters escaped).
std::string quote_for_message(const std::string& s);

}  // namespace ftx
