#include "lib/tokenizer/incremental_text.h"

namespace ftx {

size_t incomplete_utf8_tail(const std::string& s) {
  // Walk back over continuation bytes to the lead byte of the last character.
  const size_t n = s.size();
  size_t back = 0;
  while (back < n && back < 4 && (static_cast<unsigned char>(s[n - 1 - back]) & 0xC0) == 0x80) ++back;
  if (back == n) return 0;
  const unsigned char lead = static_cast<unsigned char>(s[n - 1 - back]);
  size_t want = 1;
  if ((lead & 0xE0) == 0xC0) want = 2;
  else if ((lead & 0xF0) == 0xE0) want = 3;
  else if ((lead & 0xF8) == 0xF0) want = 4;
  const size_t have = back + 1;
  return have < want ? have : 0;
}

std::string IncrementalText::add(int32_t token) {
  if (stopped_) return "";
  if (token == stop_id_) {
    stopped_ = true;
    return "";
  }
  if (token < 0 || token >= tok_.vocab_size()) return "";
  ids_.push_back(token);
  const std::string text = tok_.decode(ids_);
  // A later token can change how earlier ones decode (SentencePiece's leading space); only text
  // that extends what was shown is handed out.
  if (text.size() <= shown_.size() || text.compare(0, shown_.size(), shown_) != 0) return "";
  size_t end = text.size() - incomplete_utf8_tail(text);
  // Byte-fallback tokenizers (SentencePiece, Llama-style tokenizer.json) decode the first bytes of
  // a character as U+FFFD until its last byte arrives: a trailing U+FFFD is held back too, or the
  // finished character would no longer extend what was shown and nothing more would be printed.
  static const std::string kReplacement = "\xEF\xBF\xBD";
  while (end >= shown_.size() + kReplacement.size() &&
         text.compare(end - kReplacement.size(), kReplacement.size(), kReplacement) == 0)
    end -= kReplacement.size();
  if (end <= shown_.size()) return "";
  std::string out = text.substr(shown_.size(), end - shown_.size());
  shown_ = text.substr(0, end);
  return out;
}

std::string IncrementalText::flush() {
  const std::string text = ids_.empty() ? std::string() : tok_.decode(ids_);
  std::string out = text.size() > shown_.size() && text.compare(0, shown_.size(), shown_) == 0
                        ? text.substr(shown_.size())
                        : std::string();
  shown_ = text;
  return out;
}

void IncrementalText::reset() {
  ids_.clear();
  shown_.clear();
  stopped_ = false;
}

}  // namespace ftx
