#include "lib/tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

// encoder.py's cache grows without bound; ours (PieceCache) is emptied when half full, and keeps
// no long pieces: they are rare, and would make its size in bytes unbounded.
constexpr size_t kMaxCachedPieceBytes = 64;

// byte_alphabet() inverted: code point -> byte, -1 for code points outside the alphabet (all of
// which are below 512).
using ByteDecoder = std::array<int16_t, 512>;
const ByteDecoder& byte_decoder() {
  static const ByteDecoder decoder = [] {
    ByteDecoder d;
    d.fill(-1);
    for (int b = 0; b < 256; ++b) d[ByteLevelBpe::byte_alphabet()[b]] = static_cast<int16_t>(b);
    return d;
  }();
  return decoder;
}

std::string hex_byte(int b) {
  const char* digits = "0123456789ABCDEF";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

}  // namespace

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// are moved to U+0100 and up in byte order, so every byte has a visible, non-space character.
const std::array<char32_t, 256>& ByteLevelBpe::byte_alphabet() {
  static const std::array<char32_t, 256> map = [] {
    std::array<char32_t, 256> m{};
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) m[b] = printable[b] ? static_cast<char32_t>(b) : next++;
    return m;
  }();
  return map;
}

std::string ByteLevelBpe::spelling_to_bytes(const std::string& spelling) {
  const ByteDecoder& decoder = byte_decoder();
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(spelling.data());
  for (size_t pos = 0; pos < spelling.size();) {
    char32_t c;
    pos += utf8::decode(p + pos, spelling.size() - pos, &c);
    if (c >= decoder.size() || decoder[c] < 0) return spelling;
    out.push_back(static_cast<char>(decoder[c]));
  }
  return out;
}

ByteLevelBpe::ByteLevelBpe(const nlohmann::json& vocab, std::string source, bool require_all_bytes)
    : BpeModel(vocab, std::move(source)) {
  token_bytes_.resize(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (has_token_[id]) token_bytes_[id] = spelling_to_bytes(tokens_[id]);

  for (int b = 0; b < 256; ++b) {
    std::string spelling;
    utf8::append(spelling, byte_alphabet()[b]);
    auto it = token_to_id_.find(spelling);
    if (it == token_to_id_.end() && require_all_bytes)
      throw Error(source_, "has no token for byte " + std::to_string(b) + " (" + quote_for_message(spelling) +
                               "), so it is not a GPT-2 byte-level vocabulary");
    byte_ids_[b] = it == token_to_id_.end() ? -1 : it->second;
  }
}

void ByteLevelBpe::set_token(int32_t id, const std::string& spelling) {
  BpeModel::set_token(id, spelling);
  token_bytes_.resize(tokens_.size());
  token_bytes_[id] = spelling_to_bytes(spelling);
}

void ByteLevelBpe::encode_uncached(std::string_view piece, std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    std::string spelling;
    for (char ch : piece) utf8::append(spelling, byte_alphabet()[static_cast<uint8_t>(ch)]);
    if (auto id = find(spelling)) {
      ids->assign(1, *id);
      return;
    }
  }
  ids->resize(piece.size());
  bool missing = false;
  for (size_t i = 0; i < piece.size(); ++i) {
    (*ids)[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
    if ((*ids)[i] >= 0) continue;
    if (!unk_id_)
      throw Error(source_, "the text has byte " + hex_byte(static_cast<uint8_t>(piece[i])) +
                               ", which has no token in the vocabulary, and the model has no unk_token");
    missing = true;
  }
  merge(ids);  // a byte with no token (-1) is in no merge
  if (missing) std::replace(ids->begin(), ids->end(), int32_t{-1}, *unk_id_);
}

void ByteLevelBpe::append_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1 && byte_ids_[static_cast<uint8_t>(piece[0])] >= 0) {  // a lone byte is its own token
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.lookup(piece, out)) return;
  }
  std::vector<int32_t> ids;
  encode_uncached(piece, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    cache_.insert(piece, ids);
  }
}

std::string ByteLevelBpe::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    out += token_bytes_[id];
  }
  return out;
}

}  // namespace ftx
