// ParallelLayout: FT's TP x PP rank grid, the layer split, and the grid's errors (lib/dist/parallel.h).
#include "lib/dist/parallel.h"

#include <gtest/gtest.h>

#include <string>

#include "formats/error.h"

namespace ftx::dist {
namespace {

std::string error_of(int tp, int pp, int world, int64_t layers) {
  try {
    ParallelLayout::resolve(tp, pp, world, 0, layers);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelLayout, DefaultsAreTensorParallelOverEveryRank) {
  const auto l = ParallelLayout::resolve(0, 0, 4, 3, 8);
  EXPECT_EQ(l.tp, 4);
  EXPECT_EQ(l.pp, 1);
  EXPECT_EQ(l.tp_rank(), 3);
  EXPECT_EQ(l.stage(), 0);
  const auto p = ParallelLayout::resolve(0, 2, 4, 3, 8);  // T = ranks / P
  EXPECT_EQ(p.tp, 2);
  EXPECT_EQ(p.pp, 2);
}

TEST(ParallelLayout, RankIsTensorRankModTOfStageRDivT) {
  for (int r = 0; r < 6; ++r) {
    const auto l = ParallelLayout::resolve(2, 3, 6, r, 6);
    EXPECT_EQ(l.tp_rank(), r % 2);
    EXPECT_EQ(l.stage(), r / 2);
    EXPECT_EQ(l.world_rank(l.stage(), l.tp_rank()), r);
    EXPECT_EQ(l.first_stage(), r < 2);
    EXPECT_EQ(l.last_stage(), r >= 4);
  }
}

TEST(ParallelLayout, StagesCoverEveryLayerOnceDifferingByAtMostOne) {
  for (int64_t L = 1; L <= 13; ++L)
    for (int P = 1; P <= L; ++P) {
      int64_t next = 0, lo = L, hi = 0;
      for (int p = 0; p < P; ++p) {
        const auto l = ParallelLayout::resolve(1, P, P, p, L);
        EXPECT_EQ(l.first_layer(L), next) << "L " << L << " P " << P << " stage " << p;
        const int64_t n = l.end_layer(L) - l.first_layer(L);
        EXPECT_GE(n, 1);
        lo = std::min(lo, n);
        hi = std::max(hi, n);
        next = l.end_layer(L);
      }
      EXPECT_EQ(next, L);
      EXPECT_LE(hi - lo, 1) << "L " << L << " P " << P;
    }
  // When P divides L every stage has L / P layers, as in FT; 5 layers on 2 stages: 2 then 3.
  EXPECT_EQ(ParallelLayout::resolve(1, 4, 4, 2, 8).first_layer(8), 4);
  EXPECT_EQ(ParallelLayout::resolve(1, 2, 2, 0, 5).end_layer(5), 2);
  EXPECT_EQ(ParallelLayout::resolve(1, 2, 2, 1, 5).first_layer(5), 2);
}

TEST(ParallelLayout, WrongRankCountOrMoreStagesThanLayersIsAUsageError) {
  EXPECT_EQ(error_of(2, 2, 3, 8),
            "--tensor-para-size 2 x --pipeline-para-size 2 needs 4 ranks, but this run has 3 (mpirun -np)");
  EXPECT_EQ(error_of(0, 4, 2, 8),
            "--tensor-para-size 1 x --pipeline-para-size 4 needs 4 ranks, but this run has 2 (mpirun -np)");
  EXPECT_EQ(error_of(1, 5, 5, 4), "--pipeline-para-size 5 is more than the model's 4 layers (num_layer in config.ini)");
  EXPECT_EQ(error_of(-1, 1, 1, 4), "--tensor-para-size -1 is negative");
  EXPECT_EQ(error_of(1, 3, 3, -1), "");  // layers unknown: not checked
}

TEST(ParallelGroups, OneRankHasNoPeers) {
  SingleRank world;
  const auto g = ParallelGroups::tensor_only(world);
  EXPECT_EQ(g.tp().size(), 1);
  EXPECT_EQ(g.pp().size(), 1);
  float x = 0;
  EXPECT_THROW(g.pp().send(&x, 1, DType::kFloat32, 1), Error);
  EXPECT_EQ(world.split(0, 0)->size(), 1);
}

}  // namespace
}  // namespace ftx::dist
