// Backend::sample_rows on CUDA (kernels/sampling/) against its CPU twin decoding::sample_rows_on_host
// (which decoding_row_sampling_test shows equal, bit for bit, to the CPU decoder's own pipeline).
// Label gpu; skips without a device, fails on a broken one or under FTX_REQUIRE_GPU=1
// (gpu_test_util.h). Not yet run on a GPU.
//
// Tolerances: token ids equal, always (greedy, top-k, top-p, with ties, ±0, NaN and all -inf rows).
// Log probs within 1e-6 absolute: the full-vocab log-sum-exp sums the same float exps in another
// order, and the device's expf/exp may differ from glibc's by an ulp or two (relative ~2e-7); -inf
// must be -inf on both. The top-p draw could in principle pick the neighbouring token when u·p·total
// falls within double rounding (~1e-16 relative) of a prefix-sum boundary; no seed here does, and a
// failure of that kind would show the two prefix sums a few ulps apart.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "gpu_test_util.h"
#include "lib/decoding/row_sampling.h"
#include "lib/ops/backend.h"
#include "unit/row_sampling_cases.h"

namespace ftx {
namespace {

using decoding::SampledToken;

constexpr double kLogProbTolerance = 1e-6;

class CudaSampling : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA_DEVICE();
    be_ = ops::make_backend("cuda", 0);
  }

  // The device's results for logits [rows, stride] (uploaded, sampled where they are).
  std::vector<SampledToken> on_device(const std::vector<float>& logits, int64_t stride, int64_t vocab,
                                      const decoding::RowSamplingBatch& batch) {
    float* d = be_->alloc(logits.size());
    be_->upload(d, logits.data(), logits.size());
    std::vector<SampledToken> out(batch.rows.size());
    be_->sample_rows(d, stride, vocab, batch, out.data());
    be_->release(d);
    return out;
  }

  static std::vector<SampledToken> on_host(std::vector<float> logits, int64_t stride, int64_t vocab,
                                           const decoding::RowSamplingBatch& batch) {
    std::vector<SampledToken> out(batch.rows.size());
    decoding::sample_rows_on_host(logits.data(), stride, vocab, batch, out.data());
    return out;
  }

  static void expect_equal(const std::vector<SampledToken>& cpu, const std::vector<SampledToken>& gpu,
                           const std::string& what) {
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(cpu[i].token, gpu[i].token) << what << " entry " << i;
      EXPECT_EQ(cpu[i].nonfinite, gpu[i].nonfinite) << what << " entry " << i << ": NaN/Inf in the row's logits";
      for (auto [c, g] : {std::pair{cpu[i].log_prob, gpu[i].log_prob},
                          std::pair{cpu[i].output_log_prob, gpu[i].output_log_prob}}) {
        if (std::isinf(c)) {
          EXPECT_EQ(c, g) << what << " entry " << i;
        } else if (std::isnan(c)) {  // a row with NaN or +Inf logits: no log probability on either side
          EXPECT_TRUE(std::isnan(g)) << what << " entry " << i << ": " << g;
        } else {
          EXPECT_NEAR(c, g, kLogProbTolerance) << what << " entry " << i;
        }
      }
    }
  }

  std::unique_ptr<ops::Backend> be_;
};

TEST_F(CudaSampling, EqualsTheCpuTwinOnRandomBatches) {
  int64_t entries = 0, nonfinite = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const test::SamplingCase c = test::make_sampling_case(seed);
    const decoding::RowSamplingBatch batch = test::resolve(c);
    const std::vector<SampledToken> host = on_host(c.logits, c.stride, c.vocab, batch);
    expect_equal(host, on_device(c.logits, c.stride, c.vocab, batch),
                 "seed " + std::to_string(seed) + " vocab " + std::to_string(c.vocab));
    entries += static_cast<int64_t>(batch.rows.size());
    for (const SampledToken& t : host) nonfinite += t.nonfinite;
  }
  EXPECT_GT(entries, 1500);
  EXPECT_GT(nonfinite, 0) << "rows with NaN or Inf logits are among the cases";
  EXPECT_LT(nonfinite, entries);
}

// Logits that overflowed (issue 38: an fp16 overflow on the GPU gave "!!!!" and rc 0): every row
// holding a NaN or +Inf says so, whatever its mode, and a finite row beside it does not (nor one
// with -Inf, a ban).
TEST_F(CudaSampling, SaysWhichRowsHeldNonFiniteLogits) {
  const int64_t vocab = 1000, stride = 1024;
  std::vector<float> logits(static_cast<size_t>(4 * stride), 0.5f);
  logits[static_cast<size_t>(1 * stride + 17)] = std::numeric_limits<float>::quiet_NaN();
  logits[static_cast<size_t>(0 * stride + 5)] = -std::numeric_limits<float>::infinity();
  logits[static_cast<size_t>(2 * stride + 999)] = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) logits[static_cast<size_t>(3 * stride + i)] = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [k, p] : {std::pair<int64_t, double>{0, 0.0}, {8, 0.0}, {0, 0.9}}) {
    decoding::RowSamplingBatch batch;
    std::vector<int32_t> seen(vocab, 0);
    for (int64_t r = 0; r < 4; ++r) {
      SamplingConfig cfg;
      cfg.top_k = k;
      cfg.top_p = p;
      const auto mode = decoding::resolve_sampling_mode(cfg.top_k, cfg.top_p, vocab);
      decoding::add_row_sampling(batch, r, vocab, cfg, mode, mode.top_p, 0.5, {1, 2}, 0, seen);
    }
    const std::vector<SampledToken> gpu = on_device(logits, stride, vocab, batch);
    const std::string what = "top_k " + std::to_string(k) + " top_p " + std::to_string(p);
    EXPECT_FALSE(gpu[0].nonfinite) << what;
    EXPECT_TRUE(gpu[1].nonfinite) << what;
    EXPECT_TRUE(gpu[2].nonfinite) << what;
    EXPECT_TRUE(gpu[3].nonfinite) << what;
    expect_equal(on_host(logits, stride, vocab, batch), gpu, what);
  }
}

// A 256k vocabulary (the largest ftx serves) with every mode, one row each, many uniforms.
TEST_F(CudaSampling, EqualsTheCpuTwinOnALargeVocabulary) {
  const int64_t vocab = 256000, stride = 256000 + 8;
  std::mt19937_64 gen(24);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int draw = 0; draw < 40; ++draw) {
    std::vector<float> logits(static_cast<size_t>(4 * stride));
    for (float& x : logits) x = normal(gen);
    decoding::RowSamplingBatch batch;
    std::vector<int32_t> seen(vocab, 0);
    const std::pair<int64_t, double> modes[] = {{0, 0.0}, {1024, 0.0}, {40, 0.9}, {0, 0.95}};
    for (int64_t r = 0; r < 4; ++r) {
      SamplingConfig cfg;
      cfg.top_k = modes[r].first;
      cfg.top_p = modes[r].second;
      cfg.return_log_probs = true;
      const double u = (static_cast<double>(gen() >> 11) + 1.0) * 0x1.0p-53;
      const auto mode = decoding::resolve_sampling_mode(cfg.top_k, cfg.top_p, vocab);
      decoding::add_row_sampling(batch, r, vocab, cfg, mode, mode.top_p, u, {1, 2, 3}, 1, seen);
    }
    expect_equal(on_host(logits, stride, vocab, batch), on_device(logits, stride, vocab, batch),
                 "draw " + std::to_string(draw));
  }
}

// A row draws the same token alone and among other rows, whichever slot it is in.
TEST_F(CudaSampling, ARowsTokenDoesNotDependOnItsNeighbours) {
  const test::SamplingCase c = test::make_sampling_case(7);
  const decoding::RowSamplingBatch batch = test::resolve(c);
  const std::vector<SampledToken> all = on_device(c.logits, c.stride, c.vocab, batch);
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    decoding::RowSamplingBatch one;
    one.ids = batch.ids;
    one.rows = {batch.rows[i]};
    const std::vector<SampledToken> alone = on_device(c.logits, c.stride, c.vocab, one);
    EXPECT_EQ(alone[0].token, all[i].token) << "entry " << i;
    EXPECT_EQ(alone[0].log_prob, all[i].log_prob) << "entry " << i;
  }
}

// A whole decoder on device logits (Decoder::step(backend, ...), what the scheduler runs) against
// the host decoder: the same tokens, parents and finish reasons every step, log probs within the
// tolerance (summed over a request's tokens for cum_log_prob: 1e-6 each, 20 tokens at most).
TEST_F(CudaSampling, DecoderStepOnTheDeviceEqualsTheHostStep) {
  test::expect_backend_step_equals_host_step(*be_, test::mixed_sampling_requests(), 3000, 40 * kLogProbTolerance);
  test::expect_backend_step_equals_host_step(*be_, test::beam_requests(), 3000, 0.0);  // beams run on the host
}

TEST_F(CudaSampling, RefusesAVocabularyBeyondItsFixedPointRange) {
  decoding::RowSamplingBatch batch;
  batch.rows.resize(1);
  float* d = be_->alloc(8);
  SampledToken out;
  EXPECT_THROW(be_->sample_rows(d, int64_t(1) << 24, int64_t(1) << 24, batch, &out), Error);
  be_->release(d);
}

}  // namespace
}  // namespace ftx
