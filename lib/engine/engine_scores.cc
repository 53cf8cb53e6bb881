// Prompt scoring (ContextScores, engine.h): the lm_head on every scored position of a prefill or
// append, not only the last, a chunk of positions at a time so that a long prompt never needs
// logits for all its positions at once; the log probabilities are taken where the logits are
// (Backend::token_log_probs), so only one float per token leaves the backend.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/engine/engine.h"

namespace ftx {

namespace {

// Logits of this many bytes at most are held at once for scoring (a chunk of positions).
constexpr int64_t kScoreChunkBytes = int64_t(64) << 20;

}  // namespace

void Engine::check_scored(const std::vector<std::vector<int32_t>>& tokens, ContextScores* scores) const {
  if (!scores) return;
  const size_t B = tokens.size();
  FTX_CHECK(scores->want.size() == B, "", "scores: one flag per row");
  scores->log_probs.assign(B, {});
  for (size_t b = 0; b < B; ++b) {
    if (!scores->want[b]) continue;
    for (int32_t id : tokens[b])
      if (id < 0 || id >= cfg_.vocab_size)
        throw Error("context log probs: token " + std::to_string(id) + " is not in the vocabulary [0, " +
                    std::to_string(cfg_.vocab_size) + ") (a p-tuning virtual token cannot be scored)");
    scores->log_probs[b].assign(tokens[b].empty() ? 0 : tokens[b].size() - 1, 0.0f);
  }
}

void Engine::score_batch(const std::vector<std::vector<int32_t>>& tokens, int64_t S, int64_t first,
                         ContextScores* scores) {
  if (!scores || !runs_head_) return;
  const int64_t B = static_cast<int64_t>(tokens.size()), Vp = w_.padded_vocab(), V = cfg_.vocab_size;
  int64_t longest = 0;  // positions of one row to score
  for (int64_t b = 0; b < B; ++b)
    if (scores->want[first + b]) longest = std::max<int64_t>(longest, static_cast<int64_t>(tokens[b].size()) - 1);
  if (longest <= 0) return;
  const int64_t chunk = std::min(longest, std::max<int64_t>(1, kScoreChunkBytes / (Vp * int64_t(sizeof(float)))));
  reserve_head_gather(chunk);
  if (chunk > score_rows_ && computes_logits_) {
    if (score_logits_) be_.release(score_logits_);
    score_logits_ = be_.alloc(static_cast<size_t>(chunk * Vp));
    score_rows_ = chunk;
  }
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t>& t = tokens[b];
    const int64_t n = static_cast<int64_t>(t.size()) - 1;
    if (!scores->want[first + b] || n <= 0) continue;
    std::vector<float>& out = scores->log_probs[first + b];
    const ops::Act rows = x_ + b * S * H_;
    if (w_.final_ln_gamma) norm(rows, rows, w_.final_ln_gamma, w_.final_ln_beta, n);
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
      const int64_t m = std::min(chunk, n - t0);
      lm_head(rows + t0 * H_, m, score_logits_);  // null but on TP rank 0: a split lm_head's other ranks
      if (computes_logits_) be_.token_log_probs(score_logits_, m, Vp, V, t.data() + t0 + 1, out.data() + t0);
    }
  }
}

void Engine::deliver_scores(ContextScores* scores) {
  if (!scores || par_.layout().pp == 1) return;  // TP rank 0 of the only stage is world rank 0
  if (!delivers_logits_ && comm_.rank() != 0) return;
  std::vector<float> flat;
  for (const auto& v : scores->log_probs) flat.insert(flat.end(), v.begin(), v.end());
  if (flat.empty()) return;
  if (delivers_logits_) {
    comm_.send_host(flat.data(), flat.size() * sizeof(float), 0);
    return;
  }
  comm_.recv_host(flat.data(), flat.size() * sizeof(float), last_stage_leader());
  size_t at = 0;
  for (auto& v : scores->log_probs) {
    std::copy_n(flat.begin() + static_cast<int64_t>(at), v.size(), v.begin());
    at += v.size();
  }
}

}  // namespace ftx
