#include "lib/decoding/beam_search.h"

#include <algorithm>
#include <cmath>

namespace ftx::decoding {

double length_penalised_score(double cum_log_prob, int64_t length, double len_penalty) {
  if (len_penalty == 0.0 || length == 1) return cum_log_prob;
  return cum_log_prob / std::pow(static_cast<double>(length), len_penalty);
}

std::vector<BeamCandidate> select_beams(const float* logits, int64_t vocab,
                                        const std::vector<BeamState>& beams, double len_penalty,
                                        double diversity_rate, int32_t finished_token,
                                        SamplingWorkspace& ws) {
  const int64_t K = static_cast<int64_t>(beams.size());
  const int64_t per_beam = std::min<int64_t>(2 * K, vocab);
  struct Ranked {
    BeamCandidate c;
    double key;     // score + diversity term
    int64_t index;  // position in FT's [beam][2K] candidate buffer: ties and the diversity rank
  };
  std::vector<Ranked> all;
  all.reserve(K * per_beam);
  for (int64_t k = 0; k < K; ++k) {
    const BeamState& beam = beams[k];
    if (beam.finished) {
      BeamCandidate c{k, finished_token, 0.0, beam.cum_log_prob,
                      length_penalised_score(beam.cum_log_prob, beam.length, len_penalty)};
      all.push_back({c, c.score, k * 2 * K});  // rank 0 within the beam: no diversity bonus
      continue;
    }
    const float* row = logits + k * vocab;
    const double lse = log_sum_exp(row, vocab);
    top_k_ids(row, vocab, per_beam, ws);
    for (int64_t r = 0; r < per_beam; ++r) {
      const int32_t id = ws.order[r];
      const double step_lp = lse == -INFINITY ? -INFINITY : row[id] - lse;
      const double cum = beam.cum_log_prob + step_lp;
      BeamCandidate c{k, id, step_lp, cum, length_penalised_score(cum, beam.length, len_penalty)};
      const int64_t index = k * 2 * K + r;
      all.push_back({c, c.score + diversity_rate * static_cast<double>(index % K), index});
    }
  }
  const int64_t take = std::min<int64_t>(K, static_cast<int64_t>(all.size()));
  std::partial_sort(all.begin(), all.begin() + take, all.end(), [](const Ranked& a, const Ranked& b) {
    return a.key > b.key || (a.key == b.key && a.index < b.index);
  });
  std::vector<BeamCandidate> chosen;
  chosen.reserve(take);
  for (int64_t i = 0; i < take; ++i) chosen.push_back(all[i].c);
  return chosen;
}

}  // namespace ftx::decoding
