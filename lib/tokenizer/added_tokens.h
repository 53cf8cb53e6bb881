#pragma once
// Tokens found in the text by their spelling before the model sees it: HuggingFace's "added
// tokens" (tokenizer.json's added_tokens, tokenizer_config.json's added_tokens_decoder, the
// special tokens <s>, </s>, <unk>...). Shared by HfBpeTokenizer and SentencePieceTokenizer.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ftx {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  // transformers' AddedToken flags: the token eats the white space on its left / right, or
  // matches only as a whole word.
  bool lstrip = false, rstrip = false, single_word = false;
};

// Leftmost-longest matching of a set of tokens (tokenizers' Aho-Corasick with LeftmostLongest,
// and what transformers' Trie.split gives for sets without tokens inside other tokens).
class AddedTokenMatcher {
 public:
  void add(const AddedToken& t);
  bool empty() const { return tokens_.empty(); }
  // Calls text_fn(view) for the text between tokens and token_fn(const AddedToken&) for each
  // token, in order. Empty text between two tokens is not reported.
  template <class TextFn, class TokenFn>
  void split(std::string_view text, TextFn&& text_fn, TokenFn&& token_fn) const;

  // A token found by split_like_tokenizers and the bytes it covers, or (token null) text between.
  struct Span {
    size_t begin, end;
    const AddedToken* token;
  };
  // tokenizers' AddedVocabulary::find_matches, with the flags as tokenizers reads them (not as
  // transformers' slow tokenizers, which act on the text pieces instead; SentencePieceTokenizer's
  // business): a single_word match with a word character (regex \w) right before or after it is
  // skipped (text), lstrip / rstrip widen the match over the Unicode White_Space before / after it
  // (so that white space is not encoded), lstrip not back into the match before. Phi-3's
  // <|assistant|>, <|end|>, <|user|>... are rstrip. A span may begin before the previous one ends
  // (a token after white space eaten by rstrip), as tokenizers' offsets then do.
  std::vector<Span> split_like_tokenizers(std::string_view text) const;

 private:
  // The longest token whose text starts at `pos`, or nullptr.
  const AddedToken* match_at(std::string_view text, size_t pos) const {
    if (starts_[static_cast<uint8_t>(text[pos])])
      for (const AddedToken& t : tokens_)  // longest first: the first that matches is the longest
        if (text.compare(pos, t.content.size(), t.content) == 0) return &t;
    return nullptr;
  }

  std::vector<AddedToken> tokens_;  // longest first
  bool starts_[256] = {};           // some token starts with this byte
};

template <class TextFn, class TokenFn>
void AddedTokenMatcher::split(std::string_view text, TextFn&& text_fn, TokenFn&& token_fn) const {
  size_t gap = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* hit = match_at(text, pos);
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > gap) text_fn(text.substr(gap, pos - gap));
    token_fn(*hit);
    pos += hit->content.size();
    gap = pos;
  }
  if (gap < text.size()) text_fn(text.substr(gap));
}

}  // namespace ftx
