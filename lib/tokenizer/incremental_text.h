#pragma once
// Text of a growing token sequence, printed as it grows (streaming): each call returns only what
// is new and complete. Decoding token by token would split multi-byte characters (a byte-level BPE
// token may hold half of one) and lose SentencePiece's word-boundary spaces, so the whole sequence
// is decoded and the part not yet returned is handed out, holding back a trailing incomplete UTF-8
// character (or the U+FFFD a byte-fallback tokenizer decodes it to) until its last byte arrives.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/tokenizer/tokenizer.h"

namespace ftx {

class IncrementalText {
 public:
  // stop_id: a token that ends the text and is not shown (end_id); ids outside the tokenizer's
  // vocabulary (a model vocabulary padded past it) are skipped.
  IncrementalText(const Tokenizer& tok, int32_t stop_id) : tok_(tok), stop_id_(stop_id) {}
  // Adds one token; returns the text that became printable.
  std::string add(int32_t token);
  // The rest (an incomplete character at the very end is returned as it is).
  std::string flush();
  void reset();

 private:
  const Tokenizer& tok_;
  int32_t stop_id_;
  std::vector<int32_t> ids_;
  std::string shown_;  // the decoded text already returned
  bool stopped_ = false;
};

// Bytes at the end of `s` that start a UTF-8 character without finishing it (0..3).
size_t incomplete_utf8_tail(const std::string& s);

}  // namespace ftx
