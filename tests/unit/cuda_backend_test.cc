// What the CUDA backend refuses and how it says so (label gpu: skips without a GPU or a CUDA build,
// fails on any other CUDA error or under FTX_REQUIRE_GPU=1; gpu_test_util.h): each refusal of the
// half-precision and graph paths a one-line Error, the backend usable afterwards; without a device
// the factory's error. Its ops against the CPU: backend_ops_test (the instances On/*/cuda).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "formats/error.h"
#include "gpu_test_util.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/cuda_backend.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#endif

namespace ftx {
namespace {

using test::have_cuda_device;

// Uniform(-1, 1) values from a fixed seed (for tests outside the CudaVsCpu fixture).
std::vector<float> random_table(size_t n) {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

#ifdef FTX_HAVE_CUDA
// The refusals of the half-precision and graph paths: each a one-line Error saying what is wrong,
// and the backend still usable afterwards (an aborted capture leaves the stream capturing nothing).
TEST(CudaBackendErrors, RefusedInputsLeaveTheBackendUsable) {
  REQUIRE_CUDA_DEVICE();
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  cuda::CudaBackendOptions int8;
  int8.weight_dtype = DType::kInt8;
  EXPECT_NE(message([&] { cuda::make_cuda_backend(int8); }).find("cannot be held in int8"), std::string::npos);

  cuda::CudaBackendOptions with_graphs;
  with_graphs.graphs = true;
  auto be = cuda::make_cuda_backend(with_graphs);
  float* x = be->alloc(256);
  be->fill(x, 0.5f, 256);
  const ops::Weight int8_weight(x, DType::kInt8);
  EXPECT_NE(message([&] { be->gemm(1, 4, 4, x, int8_weight, false, x + 128, 0.0f); }).find("int8 weight without its scales"),
            std::string::npos);
  ops::AttentionShape sh;
  sh.q_heads = sh.kv_heads = 1;
  sh.head_dim = 4;
  sh.max_seq = sh.block_size = 4;
  const int32_t one = 1, row = 0;
  EXPECT_NE(message([&] {
              be->context_attention(x + 64, x, 1, 1, &one, {&row, 1}, ops::KvCache(x + 128), ops::KvCache(x + 192, DType::kFloat16), sh);
            }).find("K cache in float32, V cache in float16"),
            std::string::npos);
  std::vector<float> host(4);
  be->begin_repeatable("a step");
  EXPECT_NE(message([&] { be->download(host.data(), x, 4); }).find("inside a repeatable step"), std::string::npos);
  be->abort_repeatable();

  // A key's second run (the capture) stages more metadata than its first: refused, capture aborted.
  const std::vector<float> table = random_table(16 * 8);
  const ops::Weight wte = be->upload_weight(table.data(), DType::kFloat32, table.size());
  // Each metadata part is staged in 16-byte units: 2 rows take 16 bytes per part, 8 rows 32.
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8}, pos = {0, 1, 2, 3, 4, 5, 6, 7};
  auto step = [&](int64_t rows) {
    ops::RepeatableStep s(*be, "embed");
    be->embedding(x, wte, nullptr, ops::PositionTable::kNone, 0, ids.data(), pos.data(), rows, 8, 1.0f);
    s.finish();
  };
  step(2);
  EXPECT_NE(message([&] { step(8); }).find("staged more metadata than its first run"), std::string::npos);

  be->fill(x, 2.0f, 4);
  be->download(host.data(), x, 4);
  EXPECT_EQ(host, std::vector<float>(4, 2.0f));
  be->release_weight(wte);
  be->release(x);
}
#endif

// Without a device the factory's error says so (runs only where there is no device).
TEST(CudaBackendFactory, NoDeviceIsAClearError) {
  if (have_cuda_device()) GTEST_SKIP() << "a CUDA device is present";
  try {
    ops::make_backend("cuda", 1);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    // Built with CUDA: no device; built without: not built in.
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("no CUDA device found (cudaGetDeviceCount: ") != std::string::npos ||
                msg.find("the CUDA backend is not built in this version") != std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace ftx
