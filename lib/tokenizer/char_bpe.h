#pragma once
// The SentencePiece-style BPE model of HuggingFace tokenizer.json files (Llama 2's, Mistral's, as
// transformers' LlamaConverter writes them): spellings are UTF-8 text with "▁" for spaces, a piece
// starts as its characters, a character with no token becomes its bytes' <0xXX> tokens
// (byte_fallback) or the unknown token (consecutive ones fused into one with fuse_unk), then the
// merges apply by rank; all as tokenizers' BPE::merge_word. Decoding is the decoder those files
// have: Replace "▁" by " ", ByteFallback (runs of <0xXX> tokens back to bytes; a run that is not
// valid UTF-8 gives one U+FFFD per byte), Fuse, then Strip (up to `strip_start` leading and
// `strip_stop` trailing spaces).
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "lib/tokenizer/bpe_model.h"

namespace ftx {

class CharBpe final : public BpeModel {
 public:
  // Throws ftx::Error naming `source` and the bad entry.
  CharBpe(const nlohmann::json& vocab, std::string source, bool byte_fallback, bool fuse_unk);

  // The Strip decoder's counts (0, 0: no Strip step).
  void set_strip(int start, int stop) { strip_start_ = start, strip_stop_ = stop; }

  void append_piece(std::string_view piece, std::vector<int32_t>* out) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;

 private:
  bool byte_fallback_, fuse_unk_;
  int32_t byte_ids_[256];  // byte -> id of its <0xXX> token, -1 if none
  int strip_start_ = 0, strip_stop_ = 0;
};

}  // namespace ftx
