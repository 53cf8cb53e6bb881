// Repeated steps (Backend::begin_repeatable ... end_repeatable, through ops::RepeatableStep): ops
// that recur with the same shapes and buffers, only their host metadata changing, give the same
// bits as the same ops run eagerly. A backend with CUDA graphs (asked for here) measures a key's
// first run, captures its second and replays later ones; the CPU runs them as they come. A step
// left by an exception is aborted and the backend stays usable; forgotten recordings are made
// again. The reference of a repeated step is the eager run on the same backend, bit for bit.
#include <stdexcept>

#include "unit/backend_ops/backend_ops.h"

namespace ftx::test {

BACKEND_OP_TEST(RepeatableSteps, "begin_repeatable", "end_repeatable", "abort_repeatable", "forget_repeatables") {
  BackendOptions graphs;
  graphs.graphs = true;
  ops::Backend& b = be(graphs);
  const int64_t V = 20, H = 64, N = 48, rows = 4;
  Buffers mem(b);
  const auto table = random(V * H), w = random(H * N), bias = random(N), gamma = random(H), beta = random(H);
  const ops::Weight wte = b.upload_weight(table.data(), DType::kFloat32, table.size());
  const ops::Weight wb = b.upload_weight(w.data(), DType::kFloat32, w.size());
  float* db = mem.put(bias);
  float* dg = mem.put(gamma);
  float* dbeta = mem.put(beta);
  float* x = mem.alloc(rows * H);
  float* y = mem.alloc(rows * N);
  std::vector<int32_t> ids(rows), pos(rows);
  // One step: embed the ids at their positions, normalise, project, add the bias.
  auto ops_of_a_step = [&] {
    b.embedding(x, wte, nullptr, ops::PositionTable::kSinusoidal, 0, ids.data(), pos.data(), rows, H, 1.0f);
    b.layer_norm(x, x, dg, dbeta, rows, H, 1e-5f);
    b.gemm(rows, N, H, x, wb, false, y, 0.0f);
    b.add_bias(y, db, rows, N);
  };
  auto result = [&] { return mem.get(y, rows * N); };
  auto expect_step_equals_eager = [&](const std::string& key, int run) {
    SCOPED_TRACE(key + " run " + std::to_string(run));
    for (int64_t r = 0; r < rows; ++r) {
      ids[r] = random_int(0, V - 1);
      pos[r] = random_int(0, 500);
    }
    {
      ops::RepeatableStep step(b, key);
      ops_of_a_step();
      step.finish();
    }
    const std::vector<float> repeated = result();
    ops_of_a_step();
    EXPECT_EQ(repeated, result());
  };
  for (int run = 0; run < 4; ++run) expect_step_equals_eager("decode", run);  // measured, captured, replayed
  // An op that throws inside a step (here: the test itself) aborts it; the backend is usable.
  try {
    ops::RepeatableStep step(b, "decode");
    ops_of_a_step();
    throw std::runtime_error("an op failed");
  } catch (const std::runtime_error&) {
  }
  for (int run = 0; run < 3; ++run) expect_step_equals_eager("decode", run + 4);
  b.forget_repeatables();
  for (int run = 0; run < 3; ++run) expect_step_equals_eager("decode", run + 7);
  for (int run = 0; run < 3; ++run) expect_step_equals_eager("another key", run);
  b.release_weight(wte);
  b.release_weight(wb);
}

}  // namespace ftx::test
