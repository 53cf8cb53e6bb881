#pragma once
// Drawing one token from a row of processed logits (FT TopKSamplingLayer / TopPSamplingLayer).
// Selection uses partial sorts: O(vocab) per row plus a sort of
// only the candidates actually needed.
#include <cstdint>
#include <vector>

namespace ftx::decoding {

// How a request samples, after FT's combination rules.
struct SamplingMode {
  enum Kind { kTopK, kTopP } kind = kTopK;
  int64_t top_k = 1;   // kTopK: candidates (greedy is top-k with k = 1)
  double top_p = 1.0;  // kTopK: nucleus inside the k candidates; kTopP: nucleus over the vocab
};

// k=0,p=0 -> greedy (k:=1); k>0,p=0 -> top-k (p:=1); k>0,p>0 -> top-k with nucleus inside the k;
// k=0,p>0 -> top-p over the whole vocab. k is clipped to 1024 and to vocab, p to [0, 1].
SamplingMode resolve_sampling_mode(int64_t top_k, double top_p, int64_t vocab);

// FT's computeToppDecay (factual-nucleus sampling): the top-p layer's nucleus for the next draw
// after drawing `token` with nucleus p: `initial` (the request's top_p) when token is reset_id,
// else max(p * decay, min). In double (FT: float).
double next_top_p(double p, double initial, int32_t token, double decay, double min, int32_t reset_id);

struct SampledToken {
  int32_t token = 0;
  double log_prob = 0.0;         // log softmax over the full vocab (what cum_log_prob sums)
  double output_log_prob = 0.0;  // FT's output_log_probs: top-k renormalised within the k, top-p = log_prob
  // sample_rows: the row's logits held a NaN or +Inf before processing (logit_processing.h's
  // overflowed); the token drawn from what was left means nothing.
  bool nonfinite = false;
};

// Scratch reused across rows and steps so a step allocates nothing.
struct SamplingWorkspace {
  std::vector<int32_t> order;
  std::vector<double> bucket_mass;  // top-p
};

// log(sum(exp(logits))) in double; -inf when every logit is -inf. The logits hold no NaN
// (process_logits turns NaN into -inf).
double log_sum_exp(const float* logits, int64_t vocab);

// Ids of the k largest logits, best first (ties: lower id first), written to ws.order[0, k).
void top_k_ids(const float* logits, int64_t vocab, int64_t k, SamplingWorkspace& ws);

// Top-k draw: w_i = exp(l_i - l_max) over the k best; r = u * p * sum(w); subtract w_i best first
// and take the first with r <= 0 (else the k-th). u in (0, 1].
// full_log_prob false skips the full-vocab softmax (log_prob is then 0): FT computes log probs only
// when they are requested.
SampledToken sample_top_k(const float* logits, int64_t vocab, int64_t k, double p, double u,
                          SamplingWorkspace& ws, bool full_log_prob = true);

// Top-p draw: softmax, descending order, r = u * p, the first token whose inclusive prefix sum
// reaches r. Tokens are bucketed by logit in one pass and only the bucket where the prefix sum
// crosses r is sorted.
SampledToken sample_top_p(const float* logits, int64_t vocab, double p, double u, SamplingWorkspace& ws);

SampledToken sample(const float* logits, int64_t vocab, const SamplingMode& mode, double top_p,
                    double u, SamplingWorkspace& ws, bool full_log_prob = true);

}  // namespace ftx::decoding
