#include "lib/tokenizer/bpe_model.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>

#include "formats/error.h"

namespace ftx {
namespace {

// Ids above this are refused: no real vocabulary is near it, and it bounds what a file can make
// us allocate.
constexpr int64_t kMaxVocab = int64_t{1} << 24;

}  // namespace

std::string quote_for_message(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

BpeModel::BpeModel(const nlohmann::json& vocab, std::string source) : source_(std::move(source)) {
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
    token_to_id_.emplace(spelling, id);
  }
}

void BpeModel::grow_to(int32_t id) {
  if (id < vocab_size()) return;
  tokens_.resize(static_cast<size_t>(id) + 1);
  has_token_.resize(tokens_.size(), false);
}

bool BpeModel::add_merge(const std::string& left, const std::string& right) {
  auto merged = token_to_id_.find(left + right);
  if (merged == token_to_id_.end()) return false;
  auto l = token_to_id_.find(left), r = token_to_id_.find(right);
  if (l != token_to_id_.end() && r != token_to_id_.end())
    merges_[pair_key(l->second, r->second)] = Merge{next_rank_, merged->second};  // later duplicates win
  ++next_rank_;
  return true;
}

void BpeModel::set_token(int32_t id, const std::string& spelling) {
  if (id < 0 || id >= kMaxVocab)
    throw Error(source_, "token " + quote_for_message(spelling) + " has id " + std::to_string(id) +
                             ", expected an integer in [0, " + std::to_string(kMaxVocab) + ")");
  grow_to(id);
  has_token_[id] = true;
  tokens_[id] = spelling;
}

std::optional<int32_t> BpeModel::find(const std::string& spelling) const {
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
void BpeModel::merge(std::vector<int32_t>* symbols) const {
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

  constexpr int32_t kGone = std::numeric_limits<int32_t>::min();  // negative ids (no token) never merge
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

void BpeModel::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !has_token_[id])
    throw Error(source_, "token id " + std::to_string(id) + " is not in the vocabulary (" +
                             std::to_string(vocab_size()) + " ids)");
}

std::string BpeModel::id_to_token(int32_t id) const {
  check_id(id);
  return tokens_[id];
}

}  // namespace ftx
