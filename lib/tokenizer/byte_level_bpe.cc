#include "lib/tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <queue>

#include "formats/error.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

// Ids above this are refused: no real vocabulary is near it, and it bounds what a file can make
// us allocate.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
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

std::string quote_for_message(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

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
    : source_(std::move(source)) {
  if (!vocab.is_object() || vocab.empty())
    throw Error(source_, "expected a non-empty JSON object mapping tokens to ids");

  int64_t max_id = -1;
  for (auto& [spelling, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab)
      throw Error(source_, "token " + quote_for_message(spelling) + " has id " + id.dump() +
                               ", expected an integer in [0, " + std::to_string(kMaxVocab) + ")");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  grow_to(static_cast<int32_t>(max_id));
  token_to_id_.reserve(vocab.size());
  for (auto& [spelling, id_json] : vocab.items()) {
    auto id = static_cast<int32_t>(id_json.get<int64_t>());
    if (has_token_[id])
      throw Error(source_, "id " + std::to_string(id) + " is given to both " + quote_for_message(tokens_[id]) +
                               " and " + quote_for_message(spelling));
    has_token_[id] = true;
    tokens_[id] = spelling;
    token_bytes_[id] = spelling_to_bytes(spelling);
    token_to_id_.emplace(spelling, id);
  }

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

void ByteLevelBpe::grow_to(int32_t id) {
  if (id < vocab_size()) return;
  tokens_.resize(static_cast<size_t>(id) + 1);
  token_bytes_.resize(tokens_.size());
  has_token_.resize(tokens_.size(), false);
}

bool ByteLevelBpe::add_merge(const std::string& left, const std::string& right) {
  auto merged = token_to_id_.find(left + right);
  if (merged == token_to_id_.end()) return false;
  auto l = token_to_id_.find(left), r = token_to_id_.find(right);
  if (l != token_to_id_.end() && r != token_to_id_.end())
    merges_[pair_key(l->second, r->second)] = Merge{next_rank_, merged->second};  // later duplicates win
  ++next_rank_;
  return true;
}

void ByteLevelBpe::set_token(int32_t id, const std::string& spelling) {
  if (id < 0 || id >= kMaxVocab)
    throw Error(source_, "token " + quote_for_message(spelling) + " has id " + std::to_string(id) +
                             ", expected an integer in [0, " + std::to_string(kMaxVocab) + ")");
  grow_to(id);
  has_token_[id] = true;
  tokens_[id] = spelling;
  token_bytes_[id] = spelling_to_bytes(spelling);
}

std::optional<int32_t> ByteLevelBpe::find(const std::string& spelling) const {
  auto it = token_to_id_.find(spelling);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

// encoder.py's bpe(): while some adjacent pair has a rank, take the lowest-ranked pair and merge
// every occurrence of it, left to right without overlap. Done here with a heap of candidate pairs
// over a linked list of symbols, popping all candidates of one rank at a time so the result is the
// same as encoder.py's rounds even for merge lists whose later merges have lower ranks; O(n log n)
// instead of encoder.py's O(n^2), which matters for pathological pieces (megabytes of one letter).
// For merge lists where every merge forms its result before it is used (all trained lists), this
// is also what tokenizers' BPE (one merge at a time by rank, then position) gives.
void ByteLevelBpe::bpe(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& ids = *symbols;
  const int32_t n = static_cast<int32_t>(ids.size());
  if (n < 2) return;
  std::vector<int32_t> next(n), prev(n);
  for (int32_t i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;

  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto offer = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    auto it = merges_.find(pair_key(ids[pos], ids[next[pos]]));
    if (it != merges_.end()) heap.push({it->second.rank, pos, ids[pos], ids[next[pos]]});
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);

  constexpr int32_t kGone = -2;  // -1 is a byte with no token, which never merges
  std::vector<Candidate> round;
  while (!heap.empty()) {
    const int32_t rank = heap.top().rank;
    round.clear();
    while (!heap.empty() && heap.top().rank == rank) round.push_back(heap.top()), heap.pop();
    const int32_t merged_id = merges_.at(pair_key(round[0].left, round[0].right)).merged_id;
    std::vector<int32_t> touched;
    for (const Candidate& c : round) {  // in position order
      int32_t right = next[c.pos];
      if (ids[c.pos] != c.left || right < 0 || ids[right] != c.right) continue;  // stale
      ids[c.pos] = merged_id;
      ids[right] = kGone;
      next[c.pos] = next[right];
      if (next[right] >= 0) prev[next[right]] = c.pos;
      touched.push_back(c.pos);
    }
    // New neighbours are offered after the round, as encoder.py looks at them in its next round.
    int32_t last_offered = -1;
    for (int32_t pos : touched) {
      if (ids[pos] == kGone) continue;
      if (prev[pos] != last_offered) offer(prev[pos]);  // not twice when two merges are adjacent
      offer(pos);
      last_offered = pos;
    }
  }
  ids.erase(std::remove(ids.begin(), ids.end(), kGone), ids.end());
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
  bpe(ids);  // a byte with no token (-1) is in no merge
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

void ByteLevelBpe::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !has_token_[id])
    throw Error(source_, "token id " + std::to_string(id) + " is not in the vocabulary (" +
                             std::to_string(vocab_size()) + " ids)");
}

std::string ByteLevelBpe::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    out += token_bytes_[id];
  }
  return out;
}

std::string ByteLevelBpe::id_to_token(int32_t id) const {
  check_id(id);
  return tokens_[id];
}

}  // namespace ftx
