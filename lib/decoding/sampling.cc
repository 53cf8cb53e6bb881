#include "lib/decoding/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ftx::decoding {

namespace {

constexpr int64_t kMaxTopK = 1024;  // FT's limit on runtime_top_k
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kHeapTopKLimit = 1024;  // up to here a heap pass beats iota + nth_element

// Strict total order: larger logit first, lower id on ties (deterministic partial sorts).
struct Descending {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

float max_logit(const float* logits, int64_t vocab) {
  float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)  // logits hold no NaN (process_logits), so the order is free
  for (int64_t i = 0; i < vocab; ++i) max = logits[i] > max ? logits[i] : max;
  return max;
}

// The first id of the largest logit: a vectorised max, then the first match, instead of one pass
// whose compare-and-branch chain does not vectorise (bench/decoder-step: greedy over 64 × 50257
// logits went from 3.7 to 1.9 ms per step on 2 cores).
int32_t argmax(const float* logits, int64_t vocab) {
  const float max = max_logit(logits, vocab);
  for (int64_t i = 0; i < vocab; ++i)
    if (logits[i] == max) return static_cast<int32_t>(i);
  return 0;  // unreachable without NaN; all -inf matches at 0
}

// Top-p buckets: tokens are grouped by max - logit in steps of 1/kBucketScale; the last bucket
// holds everything at least kBucketRange below the max (mass < e^-40 each).
constexpr int kBuckets = 4096;
constexpr float kBucketRange = 40.0f;
constexpr float kBucketScale = kBuckets / kBucketRange;

int bucket_of(float max, float logit) {
  const float d = (max - logit) * kBucketScale;
  return d < static_cast<float>(kBuckets - 1) ? static_cast<int>(d) : kBuckets - 1;
}

}  // namespace

double next_top_p(double p, double initial, int32_t token, double decay, double min, int32_t reset_id) {
  return token == reset_id ? initial : std::max(p * decay, min);
}

SamplingMode resolve_sampling_mode(int64_t top_k, double top_p, int64_t vocab) {
  SamplingMode mode;
  const int64_t k = std::min({std::max<int64_t>(top_k, 0), kMaxTopK, vocab});
  const double p = std::isnan(top_p) ? 0.0 : std::clamp(top_p, 0.0, 1.0);
  if (k == 0 && p == 0.0) {
    mode.kind = SamplingMode::kTopK;  // greedy
    mode.top_k = 1;
    mode.top_p = 1.0;
  } else if (k > 0) {
    mode.kind = SamplingMode::kTopK;
    mode.top_k = k;
    mode.top_p = p == 0.0 ? 1.0 : p;
  } else {
    mode.kind = SamplingMode::kTopP;
    mode.top_k = 0;
    mode.top_p = p;
  }
  return mode;
}

double log_sum_exp(const float* logits, int64_t vocab) {
  const float max = max_logit(logits, vocab);
  if (max == -std::numeric_limits<float>::infinity()) return kNegInf;
  // Float exp (several times cheaper than double over a 256k vocab; relative error ~1e-7 per
  // term), summed in double.
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max);
  return max + std::log(sum);
}

void top_k_ids(const float* logits, int64_t vocab, int64_t k, SamplingWorkspace& ws) {
  k = std::clamp<int64_t>(k, 1, vocab);
  ws.order.resize(vocab);
  if (k == 1) {
    ws.order[0] = argmax(logits, vocab);
    return;
  }
  const Descending desc{logits};
  if (k <= kHeapTopKLimit && k < vocab) {
    // One pass with a k-element heap whose top is the worst kept id: almost every logit of a large
    // vocab is rejected by a single comparison with that top. Ids arrive in increasing order, so a
    // later equal logit never displaces an earlier one (the same tie rule as `desc`).
    auto heap_begin = ws.order.begin();
    std::iota(heap_begin, heap_begin + k, 0);
    std::make_heap(heap_begin, heap_begin + k, desc);
    for (int64_t i = k; i < vocab; ++i) {
      if (logits[i] > logits[*heap_begin]) {
        std::pop_heap(heap_begin, heap_begin + k, desc);
        *(heap_begin + (k - 1)) = static_cast<int32_t>(i);
        std::push_heap(heap_begin, heap_begin + k, desc);
      }
    }
    std::sort(heap_begin, heap_begin + k, desc);
    return;
  }
  std::iota(ws.order.begin(), ws.order.end(), 0);
  if (k < vocab) std::nth_element(ws.order.begin(), ws.order.begin() + (k - 1), ws.order.end(), desc);
  std::sort(ws.order.begin(), ws.order.begin() + k, desc);
}

SampledToken sample_top_k(const float* logits, int64_t vocab, int64_t k, double p, double u,
                          SamplingWorkspace& ws, bool full_log_prob) {
  k = std::clamp<int64_t>(k, 1, vocab);
  top_k_ids(logits, vocab, k, ws);
  const int32_t* ids = ws.order.data();
  const double max = logits[ids[0]];
  SampledToken out;
  if (max == kNegInf) {  // every token banned: nothing meaningful to draw
    out.token = ids[0];
    out.log_prob = out.output_log_prob = kNegInf;
    return out;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < k; ++i) sum += std::exp(logits[ids[i]] - max);
  double r = u * p * sum;
  int64_t chosen = k - 1;
  for (int64_t i = 0; i < k; ++i) {
    r -= std::exp(logits[ids[i]] - max);
    if (r <= 0.0) {
      chosen = i;
      break;
    }
  }
  out.token = ids[chosen];
  const double l = logits[out.token];
  out.log_prob = full_log_prob ? l - log_sum_exp(logits, vocab) : 0.0;
  out.output_log_prob = (l - max) - std::log(sum);
  return out;
}

SampledToken sample_top_p(const float* logits, int64_t vocab, double p, double u, SamplingWorkspace& ws) {
  SampledToken out;
  const float max = max_logit(logits, vocab);
  if (max == -std::numeric_limits<float>::infinity()) {
    out.token = 0;
    out.log_prob = out.output_log_prob = kNegInf;
    return out;
  }
  // Pass 1: unnormalised mass exp(l - max) per bucket of descending logit; their sum is the
  // softmax denominator.
  std::vector<double>& mass = ws.bucket_mass;
  mass.assign(kBuckets, 0.0);
  for (int64_t i = 0; i < vocab; ++i) mass[bucket_of(max, logits[i])] += std::exp(logits[i] - max);
  double total = 0.0;
  for (double m : mass) total += m;
  const double lse = max + std::log(total);
  // The walk over the fully sorted vocab stops at the first token whose inclusive prefix sum
  // reaches r = u * p (in probability; r * total unnormalised). Whole buckets above the one where
  // the prefix crosses r only contribute their sum, so only the crossing bucket is sorted.
  const double target = u * p * total;
  double before = 0.0;
  int first = 0;
  while (first < kBuckets - 1 && before + mass[first] < target) before += mass[first++];
  const Descending desc{logits};
  int32_t last_positive = -1;
  for (int b = first; b < kBuckets; ++b) {
    if (mass[b] == 0.0 && b != first) continue;
    ws.order.clear();
    for (int64_t i = 0; i < vocab; ++i) {
      if (bucket_of(max, logits[i]) == b) ws.order.push_back(static_cast<int32_t>(i));
    }
    std::sort(ws.order.begin(), ws.order.end(), desc);
    for (int32_t id : ws.order) {
      const double w = std::exp(logits[id] - max);
      if (w > 0.0) last_positive = id;
      before += w;
      if (before >= target) {
        out.token = id;
        out.log_prob = out.output_log_prob = logits[id] - lse;
        return out;
      }
    }
  }
  // Rounding left the total just short of r: the last token with any mass.
  out.token = last_positive >= 0 ? last_positive : argmax(logits, vocab);
  out.log_prob = out.output_log_prob = logits[out.token] - lse;
  return out;
}

SampledToken sample(const float* logits, int64_t vocab, const SamplingMode& mode, double top_p,
                    double u, SamplingWorkspace& ws, bool full_log_prob) {
  if (mode.kind == SamplingMode::kTopP) return sample_top_p(logits, vocab, top_p, u, ws);
  return sample_top_k(logits, vocab, mode.top_k, top_p, u, ws, full_log_prob);
}

}  // namespace ftx::decoding
