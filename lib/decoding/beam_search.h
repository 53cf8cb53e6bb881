#pragma once
// One beam-search step for one request (FT OnlineBeamSearchLayer): each live
// beam proposes its 2K best tokens by log-softmax + the beam's cum log prob; a finished beam
// proposes only end_id at log prob 0. The K best candidates by
//   cum / len^len_penalty + diversity_rate * (candidate index mod K)
// become the new beams. No finished-hypothesis pool (ParallelGpt passes none).
#include <cstdint>
#include <vector>

#include "lib/decoding/sampling.h"

namespace ftx::decoding {

// cum / len^len_penalty; unchanged when len_penalty == 0 or len == 1 (FT apply_length_penalty).
double length_penalised_score(double cum_log_prob, int64_t length, double len_penalty);

struct BeamState {       // one beam before the step
  double cum_log_prob;   // raw sum of the beam's step log probs
  int64_t length;        // FT's penalty length for this beam's candidates (see decoder.cc)
  bool finished;
};

struct BeamCandidate {
  int64_t parent;         // beam index within the request
  int32_t token;
  double step_log_prob;   // log softmax of the token in the parent's processed logits (0 if finished)
  double cum_log_prob;    // parent's cum + step_log_prob
  double score;           // length-penalised cum (without the diversity term)
};

// logits: [K, vocab] processed logits of the request's beams (rows of finished beams are ignored).
// finished_token: what a finished beam emits (end_id). Returns the K chosen candidates, best first.
std::vector<BeamCandidate> select_beams(const float* logits, int64_t vocab,
                                        const std::vector<BeamState>& beams, double len_penalty,
                                        double diversity_rate, int32_t finished_token,
                                        SamplingWorkspace& ws);

}  // namespace ftx::decoding
