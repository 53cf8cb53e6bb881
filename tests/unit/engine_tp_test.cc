// Tensor parallelism: run under `mpirun -np 2` (tests/e2e/parallel/engine_mpi.cmake). Every rank loads its
// shard of each fixture's 2-gpu folder; rank 0 checks the logits along the reference's greedy
// paths against the reference (1e-4) and against the 1-gpu folder run in the same process (1e-5).
// Without an MPI launcher (plain gtest discovery) the test skips.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>
#include <tuple>

#include "engine_test_util.h"
#include "formats/error.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/dist/communicator.h"

namespace ftx {
namespace {

TEST(EngineTensorParallel, TwoRanksMatchOneAndReference) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const std::string root = test::engine_fixtures();
  comm->barrier();
  for (const auto& name : test::engine_model_names()) {
    SCOPED_TRACE(name);
    const auto e = test::load_expected(root + "/" + name);
    const auto tp2 = test::run_greedy_paths(root + "/" + name + "/2-gpu", e, *comm);
    if (comm->rank() != 0) continue;
    dist::SingleRank single;
    const auto tp1 = test::run_greedy_paths(root + "/" + name + "/1-gpu", e, single);
    for (size_t b = 0; b < e.prompts.size(); ++b) {
      ASSERT_EQ(tp2.steps[b].size(), tp1.steps[b].size());
      for (size_t s = 0; s < tp2.steps[b].size(); ++s) {
        EXPECT_TRUE(test::logits_close(tp2.steps[b][s].data(), tp1.steps[b][s].data(), e.vocab, 1e-5))
            << "prompt " << b << " step " << s;
        EXPECT_TRUE(test::logits_close(tp2.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, 1e-4))
            << "prompt " << b << " step " << s;
      }
    }
  }
}

// Weight-only INT8 at TP 2: each rank quantises its own shard (row-parallel shards get their own
// column scales), as the emulation's tp2 section does; 1e-4 and the same greedy tokens.
TEST(EngineTensorParallel, Int8WeightOnlyTwoRanksMatchEmulation) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const std::string root = test::engine_fixtures();
  for (const auto& name : test::engine_model_names()) {
    const auto e = test::load_expected(root + "/" + name, "int8_weight_only/tp2");
    if (e.prompts.empty()) continue;
    SCOPED_TRACE(name);
    const auto tp2 = test::run_greedy_paths(root + "/" + name + "/2-gpu", e, *comm, /*int8_weight_only=*/true);
    if (comm->rank() != 0) continue;
    for (size_t b = 0; b < e.prompts.size(); ++b) {
      ASSERT_EQ(tp2.steps[b].size(), e.greedy_logits[b].size());
      for (size_t s = 0; s < tp2.steps[b].size(); ++s) {
        EXPECT_TRUE(test::logits_close(tp2.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, 1e-4))
            << "prompt " << b << " step " << s;
        const auto& l = tp2.steps[b][s];
        EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]);
      }
    }
  }
}

// INT4 weight-only at TP 2: each rank quantises its own shard; groups of 16 rows divide every rank's
// input, so the emulation's tp2 sections differ from tp1 only per column ("channel": each
// row-parallel shard is its own group). 1e-4 and the same greedy tokens.
TEST(EngineTensorParallel, Int4WeightOnlyTwoRanksMatchEmulation) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const std::string root = test::engine_fixtures();
  for (const auto& name : test::engine_int8_model_names()) {
    for (const auto& [variant, group, zero_points] :
         {std::tuple<const char*, int64_t, bool>{"g16", 16, false}, {"g16_zp", 16, true}, {"channel", 0, false}}) {
      const auto e = test::load_expected(root + "/" + name, std::string("int4_weight_only/tp2_") + variant);
      ASSERT_FALSE(e.prompts.empty()) << name << ": no INT4 TP-2 reference";
      SCOPED_TRACE(name + " " + variant);
      QuantPolicy q;
      q.int4.on = true;
      q.int4.group_size = group;
      q.int4.zero_points = zero_points;
      cpu::CpuBackend be(0);
      const auto tp2 = test::run_greedy_paths_on(be, root + "/" + name + "/2-gpu", e, *comm, {}, q);
      if (comm->rank() == 0) test::expect_greedy_paths_match(tp2, e, 1e-4);
    }
  }
}

// INT8 KV cache at TP 2: each rank quantises its heads' K and V with the same per-tensor scale;
// logits within 1e-4 of the emulation and the same greedy tokens, with fp32 weights and with
// weight-only INT8 (whose TP-2 shards have their own column scales).
TEST(EngineTensorParallel, Int8KvCacheTwoRanksMatchEmulation) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const std::string root = test::engine_fixtures();
  for (const auto& name : test::engine_model_names())
    for (const bool weight_only : {false, true}) {
      const auto e = test::load_expected(root + "/" + name,
                                         weight_only ? "int8_kv_cache/weight_only_tp2" : "int8_kv_cache/fp");
      if (e.prompts.empty()) continue;
      SCOPED_TRACE(name + (weight_only ? " int8_mode 1" : " fp32 weights"));
      const auto tp2 = test::run_greedy_paths(root + "/" + name + "/2-gpu", e, *comm, weight_only, true);
      if (comm->rank() != 0) continue;
      for (size_t b = 0; b < e.prompts.size(); ++b) {
        ASSERT_EQ(tp2.steps[b].size(), e.greedy_logits[b].size());
        for (size_t s = 0; s < tp2.steps[b].size(); ++s) {
          EXPECT_TRUE(test::logits_close(tp2.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, 1e-4))
              << "prompt " << b << " step " << s;
          const auto& l = tp2.steps[b][s];
          EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]);
        }
      }
    }
}

// The host (MPI) communicator's typed device-buffer calls: half data moves as bytes (all-gather,
// send/recv), but its sum is fp32 only (the CPU backend's activations), so a half all-reduce is
// refused, naming the dtype, on every rank before any of them enters MPI (no rank waits alone).
TEST(EngineTensorParallel, HostCommunicatorMovesHalfDataAndRefusesHalfSums) {
  if (!dist::launched_by_mpi()) GTEST_SKIP() << "needs mpirun -np 2";
  auto comm = dist::make_communicator();
  ASSERT_EQ(comm->size(), 2);
  const int r = comm->rank();
  std::vector<uint16_t> parts(6, 0);
  for (int i = 0; i < 3; ++i) parts[r * 3 + i] = static_cast<uint16_t>(0x3c00 + 10 * r + i);
  comm->all_gather(parts.data(), 3, DType::kFloat16);
  EXPECT_EQ(parts, (std::vector<uint16_t>{0x3c00, 0x3c01, 0x3c02, 0x3c0a, 0x3c0b, 0x3c0c}));
  std::vector<uint16_t> msg(5, static_cast<uint16_t>(r == 0 ? 0x4000 : 0));
  if (r == 0) comm->send(msg.data(), msg.size(), DType::kBFloat16, 1);
  else comm->recv(msg.data(), msg.size(), DType::kBFloat16, 0);
  EXPECT_EQ(msg, std::vector<uint16_t>(5, 0x4000));
  try {
    comm->all_reduce_sum(parts.data(), 6, DType::kFloat16);
    ADD_FAILURE() << "an fp16 all-reduce on the host communicator";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float16"), std::string::npos) << e.what();
  }
  std::vector<float> ones(4, 1.0f);
  comm->all_reduce_sum(ones.data(), ones.size(), DType::kFloat32);  // still usable, fp32 summed
  EXPECT_EQ(ones, std::vector<float>(4, 2.0f));
}

}  // namespace
}  // namespace ftx
