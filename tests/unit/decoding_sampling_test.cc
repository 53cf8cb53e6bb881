// Sampling (docs/runtime.md#sampling-and-log-probabilities): greedy, top-k, top-p, temperature, seeds, log probs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>

#include "formats/error.h"
#include "lib/decoding/logit_processing.h"
#include "lib/decoding/request_rng.h"
#include "lib/decoding/sampling.h"
#include "unit/decoding_test_helpers.h"

namespace ftx {
namespace {

using decoding::resolve_sampling_mode;
using decoding::sample_top_k;
using decoding::sample_top_p;
using decoding::SamplingMode;
using decoding::SamplingWorkspace;
using testing::hashed_logits;
using testing::log_softmax;
using testing::make_request;
using testing::run_decoder;

constexpr int kDraws = 20000;
constexpr double kFreqTolerance = 0.02;  // |empirical - expected| per token, 20k draws (>5 sigma)

// Empirical frequencies of `draw(u)` for kDraws uniforms from a fixed stream.
template <typename Draw>
std::vector<double> frequencies(int64_t vocab, Draw draw) {
  std::mt19937_64 gen(1234);
  std::vector<double> freq(vocab, 0.0);
  for (int i = 0; i < kDraws; ++i) {
    const double u = (static_cast<double>(gen() >> 11) + 1.0) * 0x1.0p-53;
    freq[draw(u)] += 1.0 / kDraws;
  }
  return freq;
}

std::vector<double> softmax(const std::vector<float>& l) {
  std::vector<double> lp = log_softmax(l.data(), static_cast<int64_t>(l.size()));
  for (double& v : lp) v = std::exp(v);
  return lp;
}

TEST(DecodingSampling, ModeCombinationRules) {
  SamplingMode m = resolve_sampling_mode(0, 0.0, 100);
  EXPECT_EQ(m.kind, SamplingMode::kTopK);
  EXPECT_EQ(m.top_k, 1);
  m = resolve_sampling_mode(5, 0.0, 100);
  EXPECT_EQ(m.kind, SamplingMode::kTopK);
  EXPECT_EQ(m.top_k, 5);
  EXPECT_EQ(m.top_p, 1.0);
  m = resolve_sampling_mode(5, 0.5, 100);
  EXPECT_EQ(m.kind, SamplingMode::kTopK);
  EXPECT_EQ(m.top_p, 0.5);
  m = resolve_sampling_mode(0, 0.5, 100);
  EXPECT_EQ(m.kind, SamplingMode::kTopP);
  EXPECT_EQ(m.top_p, 0.5);
  EXPECT_EQ(resolve_sampling_mode(5000, 0.0, 100000).top_k, 1024);  // FT's cap
  EXPECT_EQ(resolve_sampling_mode(50, 0.0, 10).top_k, 10);
  EXPECT_EQ(resolve_sampling_mode(0, 7.0, 10).top_p, 1.0);
  m = resolve_sampling_mode(0, -1.0, 10);  // clipped to 0: greedy
  EXPECT_EQ(m.kind, SamplingMode::kTopK);
  EXPECT_EQ(m.top_k, 1);
}

TEST(DecodingSampling, TopKIdsEqualAFullSortWithLowerIdFirstOnTies) {
  const int64_t vocab = 3000;
  std::mt19937_64 gen(5);
  std::uniform_int_distribution<int> level(-40, 40);  // many ties
  std::vector<float> l(vocab);
  for (float& v : l) v = static_cast<float>(level(gen)) * 0.25f;
  l[17] = -INFINITY;
  std::vector<int32_t> sorted(vocab);
  std::iota(sorted.begin(), sorted.end(), 0);
  std::stable_sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  SamplingWorkspace ws;
  for (int64_t k : {1, 2, 7, 256, 257, 1024, 3000}) {  // heap path, nth_element path, whole vocab
    decoding::top_k_ids(l.data(), vocab, k, ws);
    EXPECT_TRUE(std::equal(sorted.begin(), sorted.begin() + k, ws.order.begin())) << "k=" << k;
  }
}

TEST(DecodingSampling, GreedyIsArgmaxEveryStep) {
  const int64_t vocab = 50;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) { hashed_logits(7, h, l, vocab); };
  const auto run = run_decoder({make_request({3, 4}, 12)}, vocab, fn);
  std::vector<int32_t> history = {3, 4};
  std::vector<float> l(vocab);
  for (int32_t tok : run.results[0].beams[0].output_ids) {
    hashed_logits(7, history, l.data(), vocab);
    EXPECT_EQ(tok, std::max_element(l.begin(), l.end()) - l.begin());
    history.push_back(tok);
  }
  EXPECT_EQ(run.results[0].beams[0].output_ids.size(), 12u);
  EXPECT_EQ(run.results[0].beams[0].finish_reason, FinishReason::kLength);
}

TEST(DecodingSampling, TopK1EqualsGreedyWhateverTheSeed) {
  const int64_t vocab = 64;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) { hashed_logits(11, h, l, vocab, 1.0); };
  const auto greedy = run_decoder({make_request({1}, 16)}, vocab, fn);
  for (uint64_t seed : {0ull, 1ull, 99ull}) {
    SamplingConfig s;
    s.top_k = 1;
    s.seed = seed;
    const auto topk1 = run_decoder({make_request({1}, 16, s)}, vocab, fn);
    EXPECT_EQ(topk1.results[0].beams[0].output_ids, greedy.results[0].beams[0].output_ids);
  }
}

TEST(DecodingSampling, TopKStaysInsideKBestAndMatchesRenormalisedSoftmax) {
  const std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.5f, 0.7f, 1.9f, -0.3f, 1.0f};
  const int64_t k = 4;  // best: 1 (2.0), 5 (1.9), 3 (1.5), 7 (1.0)
  SamplingWorkspace ws;
  const auto freq = frequencies(8, [&](double u) { return sample_top_k(l.data(), 8, k, 1.0, u, ws).token; });
  const std::vector<int> best = {1, 5, 3, 7};
  double z = 0.0;
  for (int i : best) z += std::exp(static_cast<double>(l[i]));
  for (int i = 0; i < 8; ++i) {
    const bool in = std::find(best.begin(), best.end(), i) != best.end();
    if (!in) {
      EXPECT_EQ(freq[i], 0.0) << "token " << i << " is outside the top-k";
    } else {
      EXPECT_NEAR(freq[i], std::exp(static_cast<double>(l[i])) / z, kFreqTolerance) << "token " << i;
    }
  }
}

TEST(DecodingSampling, TopKWithTopPKeepsNucleusInsideTheK) {
  // k=3 candidates with renormalised probs .5 .3 .2 (approximately); p=0.6: r = u*0.6*sum, so the
  // third candidate is never reached and the first two split 0.5/0.6 and 0.1/0.6.
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingWorkspace ws;
  const auto freq = frequencies(4, [&](double u) { return sample_top_k(l.data(), 4, 3, 0.6, u, ws).token; });
  const double s = 0.5 + 0.3 + 0.15;
  const double r_max = 0.6 * s;
  EXPECT_NEAR(freq[0], 0.5 / r_max, kFreqTolerance);
  EXPECT_NEAR(freq[1], (r_max - 0.5) / r_max, kFreqTolerance);
  EXPECT_EQ(freq[2], 0.0);
  EXPECT_EQ(freq[3], 0.0);
}

TEST(DecodingSampling, TopPOnlyInsideNucleusAndMatchesProbabilities) {
  const std::vector<float> l = {1.0f, 3.0f, 0.0f, 2.5f, -1.0f, 2.0f, 0.5f};
  const double p = 0.8;
  SamplingWorkspace ws;
  const auto freq = frequencies(7, [&](double u) { return sample_top_p(l.data(), 7, p, u, ws).token; });
  const std::vector<double> prob = softmax(l);
  std::vector<int> order(7);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
  // Token j (sorted) is drawn when r = u*p falls in (S_{j-1}, S_j]: probability
  // (min(S_j, p) - min(S_{j-1}, p)) / p; tokens after the nucleus never.
  double before = 0.0;
  for (int id : order) {
    const double after = before + prob[id];
    const double expected = (std::min(after, p) - std::min(before, p)) / p;
    if (expected == 0.0) {
      EXPECT_EQ(freq[id], 0.0) << "token " << id << " is outside the nucleus";
    } else {
      EXPECT_NEAR(freq[id], expected, kFreqTolerance) << "token " << id;
    }
    before = after;
  }
}

TEST(DecodingSampling, TopPOverALargeVocabSortsOnlyWhatItNeedsButStillCorrect) {
  // Flat distribution over 5000 tokens: the walk goes through many chunks.
  const int64_t vocab = 5000;
  std::vector<float> l(vocab);
  for (int64_t i = 0; i < vocab; ++i) l[i] = static_cast<float>(-1e-4 * i);
  SamplingWorkspace ws;
  const std::vector<double> prob = softmax(l);
  for (double u : {1e-9, 0.25, 0.5, 0.999, 1.0}) {
    const int32_t tok = sample_top_p(l.data(), vocab, 1.0, u, ws).token;
    double cum = 0.0;
    int32_t expected = vocab - 1;
    for (int64_t i = 0; i < vocab; ++i) {  // already in descending order
      cum += prob[i];
      if (cum >= u) {
        expected = static_cast<int32_t>(i);
        break;
      }
    }
    EXPECT_NEAR(tok, expected, 1) << "u=" << u;  // float/double prefix-sum rounding at most one off
  }
}

double empirical_entropy(double temperature) {
  const int64_t vocab = 8;
  SamplingConfig s;
  s.top_k = vocab;  // full-vocab sampling
  s.temperature = temperature;
  const std::vector<float> base = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f, 0.2f};
  std::vector<double> counts(vocab, 0.0);
  const int n = 4000;
  for (int seed = 0; seed < n; ++seed) {
    s.seed = static_cast<uint64_t>(seed);
    Decoder d({make_request({1}, 1, s)}, vocab);
    std::vector<float> l = base;
    counts[d.step(l.data()).tokens[0]] += 1.0;
  }
  double h = 0.0;
  for (double c : counts) {
    if (c > 0) h -= (c / n) * std::log(c / n);
  }
  return h;
}

TEST(DecodingSampling, TemperatureSharpensOrFlattens) {
  const double h_cold = empirical_entropy(0.3);
  const double h_one = empirical_entropy(1.0);
  const double h_hot = empirical_entropy(3.0);
  EXPECT_LT(h_cold + 0.05, h_one);
  EXPECT_LT(h_one + 0.05, h_hot);
}

TEST(DecodingSampling, SeededSamplingIsReproducibleAndIndependentOfBatch) {
  const int64_t vocab = 40;
  SamplingConfig a;
  a.top_k = 8;
  a.temperature = 1.3;
  a.seed = 4242;
  SamplingConfig other_p;
  other_p.top_p = 0.9;
  other_p.seed = 1;
  SamplingConfig other_greedy;
  // Logits depend only on the row's own history, as a real model's would.
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) { hashed_logits(5, h, l, vocab, 1.0); };
  const DecodeRequest req = make_request({7, 8, 9}, 20, a);
  const auto alone = run_decoder({req}, vocab, fn);
  const auto again = run_decoder({req}, vocab, fn);
  const auto batched = run_decoder({make_request({1}, 5, other_p), make_request({2, 3, 4, 5}, 30, other_greedy), req}, vocab, fn);
  const auto& tokens = alone.results[0].beams[0].output_ids;
  EXPECT_EQ(tokens.size(), 20u);
  EXPECT_EQ(again.results[0].beams[0].output_ids, tokens);
  EXPECT_EQ(batched.results[2].beams[0].output_ids, tokens);
  // A different seed gives a different sequence (20 draws from 8 candidates).
  DecodeRequest other = req;
  other.sampling.seed = 4243;
  EXPECT_NE(run_decoder({other}, vocab, fn).results[0].beams[0].output_ids, tokens);
}

TEST(DecodingSampling, LargeVocabBatchRunsInParallelWithTheSameResult) {
  // rows * vocab above the threading threshold: requests are decoded on several threads.
  const int64_t vocab = 70000;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) { hashed_logits(31, h, l, vocab, 2.0); };
  SamplingConfig a;
  a.top_p = 0.95;
  a.seed = 77;
  SamplingConfig b = a;
  b.top_k = 40;
  b.top_p = 0.0;
  b.seed = 78;
  const DecodeRequest ra = make_request({1, 2, 3}, 6, a);
  const DecodeRequest rb = make_request({4}, 6, b);
  const auto batched = run_decoder({rb, ra, rb, ra}, vocab, fn);
  EXPECT_EQ(batched.results[1].beams[0].output_ids, run_decoder({ra}, vocab, fn).results[0].beams[0].output_ids);
  EXPECT_EQ(batched.results[2].beams[0].output_ids, run_decoder({rb}, vocab, fn).results[0].beams[0].output_ids);
  EXPECT_EQ(batched.results[3].beams[0].output_ids, batched.results[1].beams[0].output_ids);
}

TEST(DecodingSampling, TopPLogProbsArePlainLogSoftmax) {
  const int64_t vocab = 30;
  SamplingConfig s;
  s.top_p = 0.9;
  s.seed = 3;
  s.return_log_probs = true;
  std::vector<std::vector<double>> expected_lp;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) {
    hashed_logits(9, h, l, vocab, 2.0);
    expected_lp.push_back(log_softmax(l, vocab));
  };
  const auto run = run_decoder({make_request({1, 2}, 10, s)}, vocab, fn);
  const BeamResult& r = run.results[0].beams[0];
  ASSERT_EQ(r.output_log_probs.size(), 10u);
  double cum = 0.0;
  for (size_t t = 0; t < 10; ++t) {
    const double lp = expected_lp[t][r.output_ids[t]];
    EXPECT_NEAR(r.output_log_probs[t], lp, 1e-6 + 1e-6 * std::abs(lp));  // stored as float
    cum += lp;
  }
  EXPECT_NEAR(r.cum_log_prob, cum, 1e-6);
}

TEST(DecodingSampling, TopKLogProbsRenormalisedWithinKButCumIsFullSoftmax) {
  const int64_t vocab = 30;
  const int64_t k = 5;
  SamplingConfig s;
  s.top_k = k;
  s.seed = 8;
  s.return_log_probs = true;
  std::vector<std::vector<float>> seen_logits;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) {
    hashed_logits(13, h, l, vocab, 2.0);
    seen_logits.emplace_back(l, l + vocab);
  };
  const auto run = run_decoder({make_request({4}, 8, s)}, vocab, fn);
  const BeamResult& r = run.results[0].beams[0];
  double cum = 0.0;
  for (size_t t = 0; t < r.output_ids.size(); ++t) {
    const std::vector<float>& l = seen_logits[t];
    const std::vector<double> full = log_softmax(l.data(), vocab);
    std::vector<double> sorted(full);
    std::sort(sorted.rbegin(), sorted.rend());
    double topk_mass = 0.0;
    for (int64_t i = 0; i < k; ++i) topk_mass += std::exp(sorted[i]);
    const double lp = full[r.output_ids[t]];
    ASSERT_GE(lp, sorted[k - 1]);  // inside the top-k
    const double renorm = lp - std::log(topk_mass);
    EXPECT_NEAR(r.output_log_probs[t], renorm, 1e-6 + 1e-6 * std::abs(renorm));
    cum += lp;
  }
  EXPECT_NEAR(r.cum_log_prob, cum, 1e-6);
}

TEST(DecodingSampling, GreedyCumLogProbIsLogSoftmaxOfArgmax) {
  const int64_t vocab = 16;
  SamplingConfig s;
  s.return_log_probs = true;
  std::vector<std::vector<double>> lps;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) {
    hashed_logits(21, h, l, vocab);
    lps.push_back(log_softmax(l, vocab));
  };
  const auto run = run_decoder({make_request({0}, 5, s)}, vocab, fn);
  const BeamResult& r = run.results[0].beams[0];
  double cum = 0.0;
  for (size_t t = 0; t < 5; ++t) {
    cum += lps[t][r.output_ids[t]];
    EXPECT_EQ(r.output_log_probs[t], 0.0f);  // FT: greedy is top-1, renormalised within the one
  }
  EXPECT_NEAR(r.cum_log_prob, cum, 1e-6);
}

TEST(DecodingSampling, LogProbsOnlyWhenRequested) {
  const int64_t vocab = 16;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) { hashed_logits(2, h, l, vocab); };
  for (double top_p : {0.0, 0.8}) {
    SamplingConfig s;
    s.top_p = top_p;
    const auto run = run_decoder({make_request({0}, 4, s)}, vocab, fn);
    EXPECT_TRUE(run.results[0].beams[0].output_log_probs.empty());
    EXPECT_EQ(run.results[0].beams[0].cum_log_prob, 0.0);
  }
}

TEST(DecodingSampling, TopPDecayShrinksNucleusAndResets) {
  // Two tokens: p(0) = 0.6, p(1) = 0.4. With top_p 1 and decay 0.5 the nucleus after one draw is
  // 0.5 < 0.6, so from the second step on only token 0 can be drawn, unless a reset id restores p.
  const std::vector<float> base = {std::log(0.6f), std::log(0.4f), -INFINITY};
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>&, float* l) { std::copy(base.begin(), base.end(), l); };
  int ones_after_first = 0;
  int ones_with_reset = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplingConfig s;
    s.top_p = 1.0;
    s.top_p_decay = 0.5;
    s.top_p_min = 0.1;
    s.seed = seed;
    const auto run = run_decoder({make_request({2}, 6, s)}, 3, fn);
    const auto& ids = run.results[0].beams[0].output_ids;
    for (size_t t = 1; t < ids.size(); ++t) ones_after_first += ids[t] == 1;
    s.top_p_reset_id = 0;  // every draw of token 0 restores p = 1
    const auto reset = run_decoder({make_request({2}, 6, s)}, 3, fn);
    const auto& rid = reset.results[0].beams[0].output_ids;
    for (size_t t = 1; t < rid.size(); ++t) ones_with_reset += rid[t] == 1;
  }
  EXPECT_EQ(ones_after_first, 0);
  EXPECT_GT(ones_with_reset, 100);  // about 0.4 * 5 * 200 * (share of steps after a 0)
}

TEST(DecodingSampling, I49_TopPDecayStepsAsFtsComputeToppDecay) {
  // FT's computeToppDecay: p <- max(p * decay, min) after each draw, back to the initial top_p
  // after a draw of the reset id. Hand values for top_p 0.9, decay 0.7, min 0.2, reset id 3.
  const int32_t drawn[] = {5, 5, 5, 5, 5, 3, 5, 5};
  const double want[] = {0.63, 0.441, 0.3087, 0.21609, 0.2, 0.9, 0.63, 0.441};
  double p = 0.9;
  for (int t = 0; t < 8; ++t) {
    p = decoding::next_top_p(p, 0.9, drawn[t], 0.7, 0.2, 3);
    EXPECT_NEAR(p, want[t], 1e-12) << "after draw " << t;
  }
  EXPECT_EQ(decoding::next_top_p(0.5, 0.9, 3, 0.7, 0.2, -1), 0.35);  // -1: no reset id
}

// FT's top-p draw in float64, independent of lib/decoding: softmax, ids by descending probability
// (ties: lower id first), the first whose inclusive prefix sum reaches u * p.
int32_t reference_top_p(const std::vector<float>& logits, double p, double u) {
  const std::vector<double> lp = log_softmax(logits.data(), static_cast<int64_t>(logits.size()));
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  double sum = 0.0;
  for (int32_t id : order) {
    sum += std::exp(lp[id]);
    if (sum >= u * p) return id;
  }
  return order.back();
}

TEST(DecodingSampling, I49_FactualNucleusRunEqualsAFloat64ReferenceOfFtsRule) {
  // A whole run of the top-p layer with decay, min and reset id: each step's p from FT's rule in
  // float64 and the token drawn with it by reference_top_p, from the request's own uniforms.
  const int64_t vocab = 12;
  const double top_p = 0.95, decay = 0.6, min_p = 0.25;
  const int32_t reset = 2;
  auto fn = [&](int64_t, int64_t, const std::vector<int32_t>& h, float* l) { hashed_logits(9, h, l, vocab, 1.0); };
  int resets = 0, at_min = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SamplingConfig s;
    s.top_p = top_p;
    s.top_p_decay = decay;
    s.top_p_min = min_p;
    s.top_p_reset_id = reset;
    s.seed = seed;
    const std::vector<int32_t> prompt = {1, 4};
    const auto run = run_decoder({make_request(prompt, 16, s)}, vocab, fn);
    const auto& got = run.results[0].beams[0].output_ids;
    decoding::RequestRng rng(seed);
    std::vector<int32_t> history = prompt, want;
    double p = top_p;
    std::vector<float> l(vocab);
    for (int t = 0; t < 16; ++t) {
      fn(t, 0, history, l.data());
      const int32_t token = reference_top_p(l, p, rng.uniform());
      want.push_back(token);
      history.push_back(token);
      if (token == reset) {
        p = top_p;
        ++resets;
      } else {
        p = std::max(p * decay, min_p);
        at_min += p == min_p;
      }
    }
    EXPECT_EQ(got, want) << "seed " << seed;
  }
  EXPECT_GT(resets, 10);  // the run went through resets and the floor, not only the decay
  EXPECT_GT(at_min, 100);
}

TEST(DecodingSampling, I49_TopPDecayValuesOutsideFtsRangesAreRefusedByName) {
  auto refused = [](SamplingConfig s, const std::string& needle) {
    try {
      check_decode_request(make_request({1}, 4, s), 16);
      ADD_FAILURE() << "accepted; wanted " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  SamplingConfig s;
  s.top_p = 0.9;
  for (double bad : {0.0, -0.5, 1.5}) {
    SamplingConfig d = s;
    d.top_p_decay = bad;
    std::ostringstream v;
    v << "top_p_decay " << bad << " outside (0, 1]";
    refused(d, v.str());
    SamplingConfig m = s;
    m.top_p_min = bad;
    std::ostringstream w;
    w << "top_p_min " << bad << " outside (0, 1]";
    refused(m, w.str());
  }
  SamplingConfig r = s;
  r.top_p_reset_id = 16;
  refused(r, "top_p_reset_ids 16 outside the vocabulary [0, 16)");
  r.top_p_reset_id = -2;
  refused(r, "top_p_reset_ids -2 outside the vocabulary");
  SamplingConfig k = s;
  k.top_k = 4;  // the top-k layer never decays its nucleus
  k.top_p_decay = 0.5;
  refused(k, "top_p_decay 0.5 has no effect outside top-p sampling");
  SamplingConfig g;  // greedy
  g.top_p_reset_id = 3;
  refused(g, "top_p_reset_ids 3 has no effect outside top-p sampling");
  s.top_p_decay = 1.0, s.top_p_min = 1.0, s.top_p_reset_id = 15;
  EXPECT_NO_THROW(check_decode_request(make_request({1}, 4, s), 16));
}

}  // namespace
}  // namespace ftx
