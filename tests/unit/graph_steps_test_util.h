#pragma once
// Decode steps of two engines over the same model, one with CUDA graphs and one launching eagerly
// (cuda_backend_test's CudaGraphs, engine_graphs_gpu_test's CudaGraphsHalf).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "lib/engine/engine.h"

namespace ftx::test {

// Prefills `prompts` into rows 0..B-1 of both engines (reserved with a spare row B), then decodes
// `steps` greedy steps of the eager engine's tokens: all B rows until step `shrink_at`, then B - 1
// (the last has stopped: a new batch size, measured, captured and replayed anew), with a beam-style
// copy_rows of row 0 into the spare row before step 2. Every output of `graphed` must equal
// `eager`'s bit for bit: the graph holds the same kernels in the same order.
inline void expect_graph_steps_equal_eager(Engine& eager, Engine& graphed,
                                           const std::vector<std::vector<int32_t>>& prompts, int64_t V,
                                           int64_t steps, int64_t shrink_at) {
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<int32_t> rows(B);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<float> le(B * V), lg(B * V);
  eager.prefill(prompts, rows, le.data());
  graphed.prefill(prompts, rows, lg.data());
  EXPECT_EQ(lg, le);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t n = s < shrink_at ? B : std::max<int64_t>(B - 1, 1);
    if (s == 2) {  // outside a step: beam fan-out into the spare row
      eager.copy_rows({static_cast<int32_t>(B)}, {0});
      graphed.copy_rows({static_cast<int32_t>(B)}, {0});
    }
    std::vector<int32_t> tokens(n), active(rows.begin(), rows.begin() + n);
    for (int64_t b = 0; b < n; ++b)
      tokens[b] = static_cast<int32_t>(std::max_element(le.begin() + b * V, le.begin() + (b + 1) * V) -
                                       (le.begin() + b * V));
    std::vector<float> oe(n * V), og(n * V);
    eager.decode(tokens, active, oe.data());
    graphed.decode(tokens, active, og.data());
    EXPECT_EQ(og, oe) << "step " << s << " (" << n << " rows)";
    std::copy(oe.begin(), oe.end(), le.begin());
  }
}

}  // namespace ftx::test
