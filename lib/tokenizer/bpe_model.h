#pragma once
// What every BPE model ftx reads has in common: a vocabulary of spellings and ids, merges applied
// by rank, an unknown token, ignore_merges, and the errors for ids outside the vocabulary. How a
// piece of text becomes the first symbols, and how ids become text again, is the subclass's:
// ByteLevelBpe (GPT-2's byte alphabet) and CharBpe (characters with byte fallback, the
// SentencePiece-style BPE of Llama 2's and Mistral's tokenizer.json).
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ftx {

class BpeModel {
 public:
  // `vocab` is a JSON object mapping spellings to ids (vocab.json, or tokenizer.json's model.vocab),
  // read from `source` (named in errors). Throws ftx::Error naming `source` and the bad entry.
  BpeModel(const nlohmann::json& vocab, std::string source);
  virtual ~BpeModel() = default;

  // Adds the next merge (its rank is the number of merges added before it). Returns false when
  // left + right is not a token; a merge whose parts are not tokens is kept as a rank but can
  // never apply, as every symbol BPE forms is a token. A later duplicate pair wins.
  bool add_merge(const std::string& left, const std::string& right);
  // Gives `id` the spelling `spelling` for id_to_token and decode (added tokens of tokenizer.json,
  // which need not be in the BPE vocabulary). Does not change how text is merged.
  virtual void set_token(int32_t id, const std::string& spelling);
  // The id for text with no token (see the subclass).
  void set_unk_id(std::optional<int32_t> id) { unk_id_ = id; }
  // tokenizer.json's `ignore_merges`: a piece whose whole spelling is a token is that token.
  void set_ignore_merges(bool on) { ignore_merges_ = on; }

  // Appends the ids of one pre-tokenized piece (raw bytes, not yet spelled).
  virtual void append_piece(std::string_view piece, std::vector<int32_t>* out) const = 0;
  // The text the ids stand for. Throws ftx::Error naming the first id with no token.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;

  std::string id_to_token(int32_t id) const;
  // The id of a spelling in the BPE vocabulary (not the added tokens).
  std::optional<int32_t> find(const std::string& spelling) const;
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  void check_id(int32_t id) const;

 protected:
  // Merges adjacent symbols by rank until no pair has one (see the .cc). Ids below 0 never merge.
  void merge(std::vector<int32_t>* symbols) const;

  std::string source_;
  std::vector<std::string> tokens_;  // id -> spelling ("" for unused ids)
  std::vector<bool> has_token_;
  std::unordered_map<std::string, int32_t> token_to_id_;  // the BPE vocabulary only
  std::optional<int32_t> unk_id_;
  bool ignore_merges_ = false;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void grow_to(int32_t id);

  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, result
  int32_t next_rank_ = 0;
};

// A token spelling quoted for a one-line message (control characters escaped).
std::string quote_for_message(const std::string& s);

}  // namespace ftx
