#include "lib/tokenizer/gpt2_bpe.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <queue>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "lib/tokenizer/gpt2_pretokenizer.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

// Ids above this are refused: no real vocabulary is near it, and it bounds what a file can make
// us allocate.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
// encoder.py's cache grows without bound; ours (PieceCache) is emptied when half full, and keeps
// no long pieces: they are rare, and would make its size in bytes unbounded.
constexpr size_t kMaxCachedPieceBytes = 64;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// are moved to U+0100 and up in byte order, so every byte has a visible, non-space character.
std::array<char32_t, 256> bytes_to_unicode() {
  std::array<char32_t, 256> map{};
  std::array<bool, 256> printable{};
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) map[b] = printable[b] ? static_cast<char32_t>(b) : next++;
  return map;
}

std::string read_whole_file(const std::string& path) {
  auto file = MappedFile::open(path);
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

// bytes_to_unicode() inverted: code point -> byte, -1 for code points outside the alphabet (all
// of which are below 512).
using ByteDecoder = std::array<int16_t, 512>;
ByteDecoder unicode_to_bytes(const std::array<char32_t, 256>& byte_map) {
  ByteDecoder decoder;
  decoder.fill(-1);
  for (int b = 0; b < 256; ++b) decoder[byte_map[b]] = static_cast<int16_t>(b);
  return decoder;
}

// The bytes a vocabulary spelling stands for; nullopt when it uses a character outside the
// bytes_to_unicode alphabet (then decode falls back to the spelling's own UTF-8).
std::optional<std::string> spelling_to_bytes(const std::string& spelling, const ByteDecoder& decoder) {
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(spelling.data());
  for (size_t pos = 0; pos < spelling.size();) {
    char32_t c;
    pos += utf8::decode(p + pos, spelling.size() - pos, &c);
    if (c >= decoder.size() || decoder[c] < 0) return std::nullopt;
    out.push_back(static_cast<char>(decoder[c]));
  }
  return out;
}

// A token spelling quoted for a one-line message (control characters escaped).
std::string quote_for_message(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_txt_path)
    : vocab_path_(vocab_json_path), merges_path_(merges_txt_path) {
  std::unordered_map<std::string, int32_t> token_to_id = load_vocab();
  load_merges(token_to_id);
}

std::unordered_map<std::string, int32_t> Gpt2BpeTokenizer::load_vocab() {
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_whole_file(vocab_path_));
  } catch (const nlohmann::json::exception& e) {
    throw Error(vocab_path_, std::string("not valid JSON: ") + e.what());
  }
  if (!vocab.is_object() || vocab.empty())
    throw Error(vocab_path_, "expected a non-empty JSON object mapping tokens to ids");

  int64_t max_id = -1;
  for (auto& [spelling, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab)
      throw Error(vocab_path_, "token " + quote_for_message(spelling) + " has id " + id.dump() + ", expected an integer in [0, " +
                                   std::to_string(kMaxVocab) + ")");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  tokens_.assign(static_cast<size_t>(max_id + 1), std::string());
  token_bytes_.assign(tokens_.size(), std::string());
  has_token_.assign(tokens_.size(), false);
  std::unordered_map<std::string, int32_t> token_to_id;
  token_to_id.reserve(vocab.size());

  const auto byte_map = bytes_to_unicode();
  const ByteDecoder byte_decoder = unicode_to_bytes(byte_map);

  for (auto& [spelling, id_json] : vocab.items()) {
    auto id = static_cast<int32_t>(id_json.get<int64_t>());
    if (has_token_[id])
      throw Error(vocab_path_, "id " + std::to_string(id) + " is given to both " + quote_for_message(tokens_[id]) + " and " +
                                   quote_for_message(spelling));
    has_token_[id] = true;
    tokens_[id] = spelling;
    token_bytes_[id] = spelling_to_bytes(spelling, byte_decoder).value_or(spelling);
    token_to_id.emplace(spelling, id);
  }

  for (int b = 0; b < 256; ++b) {
    std::string spelling;
    utf8::append(spelling, byte_map[b]);
    auto it = token_to_id.find(spelling);
    if (it == token_to_id.end())
      throw Error(vocab_path_, "has no token for byte " + std::to_string(b) + " (" + quote_for_message(spelling) +
                                   "), so it is not a GPT-2 byte-level vocabulary");
    byte_ids_[b] = it->second;
  }
  auto eot = token_to_id.find("<|endoftext|>");
  if (eot != token_to_id.end()) end_of_text_ = eot->second;
  return token_to_id;
}

void Gpt2BpeTokenizer::load_merges(const std::unordered_map<std::string, int32_t>& token_to_id) {
  const std::string text = read_whole_file(merges_path_);
  merges_.reserve(64 * 1024);
  int32_t rank = 0;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // no alphabet character is CR
    if (line.empty()) continue;
    if (line_no == 1 && line.substr(0, 8) == "#version") continue;
    size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw Error(merges_path_, "line " + std::to_string(line_no) + ": expected two tokens separated by one space, found " +
                                    quote_for_message(std::string(line)));
    std::string left(line.substr(0, space)), right(line.substr(space + 1));
    auto merged = token_to_id.find(left + right);
    if (merged == token_to_id.end())
      throw Error(merges_path_, "line " + std::to_string(line_no) + ": merge " + quote_for_message(std::string(line)) + " makes " +
                                    quote_for_message(left + right) + ", which is not in " + vocab_path_);
    auto l = token_to_id.find(left), r = token_to_id.find(right);
    // A merge of a part that is not a token can never apply (every symbol BPE forms is a token).
    if (l != token_to_id.end() && r != token_to_id.end())
      merges_[pair_key(l->second, r->second)] = Merge{rank, merged->second};  // later duplicates win, as in encoder.py's dict
    ++rank;
  }
}

// encoder.py's bpe(): while some adjacent pair has a rank, take the lowest-ranked pair and merge
// every occurrence of it, left to right without overlap. Done here with a heap of candidate pairs
// over a linked list of symbols, popping all candidates of one rank at a time so the result is the
// same as encoder.py's rounds even for merge lists whose later merges have lower ranks; O(n log n)
// instead of encoder.py's O(n^2), which matters for pathological pieces (megabytes of one letter).
void Gpt2BpeTokenizer::bpe(std::vector<int32_t>* symbols) const {
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

  constexpr int32_t kGone = -1;
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

void Gpt2BpeTokenizer::append_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1) {  // a lone byte is its own token; no need to look further
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.lookup(piece, out)) return;
  }
  std::vector<int32_t> ids(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) ids[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
  bpe(&ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    cache_.insert(piece, ids);
  }
}

std::vector<int32_t> Gpt2BpeTokenizer::encode_piece(std::string_view piece) const {
  std::vector<int32_t> ids;
  append_piece(piece, &ids);
  return ids;
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view utf8) const {
  std::vector<int32_t> out;
  out.reserve(utf8.size() / 3 + 4);  // English runs at about 4 bytes per token
  std::vector<std::string_view> pieces;
  Gpt2PreTokenizer::split(utf8, &pieces);
  for (std::string_view piece : pieces) append_piece(piece, &out);
  return out;
}

void Gpt2BpeTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !has_token_[id])
    throw Error(vocab_path_, "token id " + std::to_string(id) + " is not in the vocabulary (" +
                                 std::to_string(vocab_size()) + " ids)");
}

std::string Gpt2BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    out += token_bytes_[id];
  }
  return out;
}

std::string Gpt2BpeTokenizer::id_to_token(int32_t id) const {
  check_id(id);
  return tokens_[id];
}

}  // namespace ftx
