// The NCCL communicator on CUDA (label gpu; skips without a GPU, gpu_test_util.h). The loader of
// the NCCL library: nccl_library_test.
#include <gtest/gtest.h>

#include <memory>

#include "formats/error.h"
#include "gpu_test_util.h"
#include "lib/dist/communicator.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_NCCL
#include "kernels/cuda_backend/nccl_communicator.h"
#endif

namespace ftx {
namespace {

#ifdef FTX_HAVE_NCCL
// One rank needs no NCCL communicator: the host one comes back. The NCCL path proper (2+ ranks,
// one GPU each, under mpirun) has no test yet.
TEST(CudaNccl, SingleRankKeepsTheHostCommunicator) {
  REQUIRE_CUDA_DEVICE();
  auto gpu = ops::make_backend("cuda", 1);
  auto comm = cuda::make_nccl_communicator(std::make_unique<dist::SingleRank>(), *gpu);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->rank(), 0);
  auto cpu = ops::make_backend("cpu", 1);
  EXPECT_THROW(cuda::make_nccl_communicator(std::make_unique<dist::SingleRank>(), *cpu), Error);
}
#endif
#ifndef FTX_HAVE_NCCL
TEST(CudaNccl, NotBuilt) { GTEST_SKIP() << "ftx was built without CUDA or without NCCL's header"; }
#endif

}  // namespace
}  // namespace ftx
