// sample_rows: one token per sampling row from logits in the backend's memory, by
// lib/decoding/row_sampling.h's steps (NaN and bans to -inf, temperature, penalties and min_length
// in fp32; a top-k or top-p draw with the row's uniform, ties to the lower id; log probs over the
// full vocabulary). Random batches (row_sampling_cases.h): every mode, penalties, bad words, NaN,
// exact ties, ±0, all -inf rows, padded rows whose padding must never be read.
//
// The CPU against the float64 reference (reference.h's sample_ref): the same token (except where
// u·p·total falls within rounding of a cumulative boundary, which the reference says), log probs
// within 1e-6. A device against the CPU: the same tokens and flags, log probs within 1e-6 (the
// same float exps summed in another order).
#include <algorithm>
#include <cmath>
#include <string>

#include "formats/error.h"

#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"
#include "unit/row_sampling_cases.h"

namespace ftx::test {
namespace {

bool log_prob_close(double got, double want) { return got == want || std::fabs(got - want) <= 1e-6; }

std::vector<decoding::SampledToken> sample_on(ops::Backend& b, const SamplingCase& c,
                                              const decoding::RowSamplingBatch& batch) {
  Buffers mem(b);
  float* logits = mem.put(c.logits);
  std::vector<decoding::SampledToken> out(batch.rows.size());
  b.sample_rows(logits, c.stride, c.vocab, batch, out.data());
  return out;
}

}  // namespace

BACKEND_OP_TEST(SampleRows, "sample_rows") {
  int ambiguous = 0, rows = 0;
  for (int i = 0; i < 24; ++i) {
    const uint64_t case_seed = rng()();
    SCOPED_TRACE("sampling case seed " + std::to_string(case_seed));
    const SamplingCase c = make_sampling_case(case_seed);
    const decoding::RowSamplingBatch batch = resolve(c);
    const std::vector<decoding::SampledToken> got = sample_on(be(), c, batch);
    const std::vector<decoding::SampledToken> cpu = on_cpu() ? got : sample_on(cpu_ref(), c, batch);
    for (size_t e = 0; e < batch.rows.size(); ++e) {
      const decoding::RowSampling& r = batch.rows[e];
      const bool log_probs = r.log_probs || r.mode.kind == decoding::SamplingMode::kTopP;
      SCOPED_TRACE("entry " + std::to_string(e) + " (row " + std::to_string(r.row) + ")");
      ++rows;
      if (!on_cpu()) {
        EXPECT_EQ(got[e].token, cpu[e].token);
        EXPECT_EQ(got[e].nonfinite, cpu[e].nonfinite);
        EXPECT_PRED2(log_prob_close, got[e].log_prob, cpu[e].log_prob);
        EXPECT_PRED2(log_prob_close, got[e].output_log_prob, cpu[e].output_log_prob);
        continue;
      }
      const SampleRef want = sample_ref(c.logits.data() + r.row * c.stride, c.vocab, r, batch.ids.data());
      EXPECT_EQ(got[e].nonfinite, want.t.nonfinite);
      if (want.t.nonfinite) continue;  // the draw means nothing (the decoder ends the request)
      if (want.all_banned) {
        if (log_probs) EXPECT_EQ(got[e].log_prob, -INFINITY);
        continue;
      }
      if (want.ambiguous) {
        ++ambiguous;
        continue;
      }
      EXPECT_EQ(got[e].token, want.t.token);
      if (log_probs) EXPECT_PRED2(log_prob_close, got[e].log_prob, want.t.log_prob);
      EXPECT_PRED2(log_prob_close, got[e].output_log_prob, want.t.output_log_prob);
    }
  }
  EXPECT_LE(ambiguous * 20, rows) << ambiguous << " of " << rows << " draws fell on a boundary";
}

}  // namespace ftx::test

namespace ftx::test {

// token_log_probs (prompt scoring): log_softmax of each row at its target, over the first `vocab`
// columns of padded rows (the padding holds values that must never be read), against the float64
// formula l[t] - log Σ exp(l) (shifted by the row's max); rows with a spread beyond float exp's
// range, and a row with a NaN (NaN). Tolerance: 1e-6 of max(1, |want|), CPU and device.
BACKEND_OP_TEST(TokenLogProbs, "token_log_probs") {
  for (int64_t vocab : {1, 64, 1000, 50257})
    for (int64_t rows : {1, 5}) {
      const int64_t stride = vocab + (vocab % 8 == 0 ? 0 : 8 - vocab % 8) + 8;
      SCOPED_TRACE("rows " + std::to_string(rows) + " vocab " + std::to_string(vocab));
      std::vector<float> logits = random(static_cast<size_t>(rows * stride), -20.0f, 20.0f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = vocab; i < stride; ++i) logits[r * stride + i] = 1e30f;  // padding
      if (rows > 1) logits[1 * stride] = 200.0f;  // exp(-200 - 20) underflows in float
      if (rows > 2 && vocab > 1) logits[2 * stride + 1] = NAN;
      std::vector<int32_t> targets(static_cast<size_t>(rows));
      for (auto& t : targets) t = random_int(0, static_cast<int32_t>(vocab - 1));
      expect_matches(
          [&](ops::Backend& b) {
            Buffers mem(b);
            std::vector<float> out(static_cast<size_t>(rows));
            b.token_log_probs(mem.put(logits), rows, stride, vocab, targets.data(), out.data());
            return Outs{{"log_probs", out}};
          },
          [&] {
            std::vector<float> want(static_cast<size_t>(rows));
            for (int64_t r = 0; r < rows; ++r) {
              const float* l = logits.data() + r * stride;
              double top = -INFINITY, sum = 0.0;
              bool nan = false;
              for (int64_t i = 0; i < vocab; ++i) {
                nan |= std::isnan(l[i]);
                top = std::max(top, static_cast<double>(l[i]));
              }
              for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(l[i]) - top);
              want[r] = nan ? NAN : static_cast<float>(l[targets[r]] - top - std::log(sum));
            }
            return Outs{{"log_probs", want}};
          },
          Tol{1e-6, 1e-6});
    }
  // A target outside the vocabulary is an Error, before anything is read.
  Buffers mem(be());
  const std::vector<float> logits = random(8);
  float out = 0.0f;
  const int32_t bad = 8;
  EXPECT_THROW(be().token_log_probs(mem.put(logits), 1, 8, 8, &bad, &out), Error);
}

}  // namespace ftx::test
