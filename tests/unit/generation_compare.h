#pragma once
// Two runs of the same requests (other batching, block sizes, budgets): the same tokens and finish
// reasons for every beam, log probs within `tol` (a GEMM of one row and of several round
// differently), a beam's cumulative log prob within tol per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lib/engine/scheduler.h"

namespace ftx::test {

inline void expect_same_results(const std::vector<GenerationOutput>& a, const std::vector<GenerationOutput>& b,
                                const std::string& what, double tol = 1e-5) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].result.beams.size(), b[i].result.beams.size()) << what << " request " << i;
    for (size_t k = 0; k < a[i].result.beams.size(); ++k) {
      const BeamResult &x = a[i].result.beams[k], &y = b[i].result.beams[k];
      EXPECT_EQ(x.output_ids, y.output_ids) << what << " request " << i << " beam " << k;
      EXPECT_EQ(x.finish_reason, y.finish_reason) << what << " request " << i << " beam " << k;
      const double n = static_cast<double>(std::max<size_t>(1, x.output_ids.size()));
      EXPECT_NEAR(x.cum_log_prob, y.cum_log_prob, tol * n) << what << " request " << i << " beam " << k;
      ASSERT_EQ(x.output_log_probs.size(), y.output_log_probs.size()) << what << " request " << i;
      for (size_t t = 0; t < x.output_log_probs.size(); ++t)
        EXPECT_NEAR(x.output_log_probs[t], y.output_log_probs[t], tol) << what << " request " << i << " token " << t;
    }
  }
}

}  // namespace ftx::test
