// Which communicator a run gets for its device (lib/dist/device_communicator.h): the host one on the
// CPU or with one rank; with several ranks on another device, that device's registered communicator,
// or a clear one-line error, never the host (MPI) communicator with device pointers. And the
// backend registry behind make_backend(). No MPI or GPU needed: the host communicator is a stand-in
// claiming several ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "formats/error.h"
#include "lib/dist/device_communicator.h"
#include "lib/ops/backend_registry.h"

namespace ftx {
namespace {

class FakeRanks : public dist::SingleRank {
 public:
  explicit FakeRanks(int n) : n_(n) {}
  int size() const override { return n_; }

 private:
  int n_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeviceCommunicator, HostCommunicatorOnTheCpuOrWithOneRank) {
  auto cpu = ops::make_backend("cpu", 1);
  auto* host = new FakeRanks(4);
  auto comm = dist::communicator_for_device("cpu", std::unique_ptr<dist::Communicator>(host), *cpu);
  EXPECT_EQ(comm.get(), host);
  auto* one = new FakeRanks(1);
  comm = dist::communicator_for_device("nodevice-test", std::unique_ptr<dist::Communicator>(one), *cpu);
  EXPECT_EQ(comm.get(), one);  // nothing to reduce: no device communicator needed
}

TEST(DeviceCommunicator, SeveralRanksWithoutADeviceCommunicatorIsRefused) {
  auto cpu = ops::make_backend("cpu", 1);
  const std::string msg = error_of([&] {
    dist::communicator_for_device("nodevice-test", std::make_unique<FakeRanks>(2), *cpu);
  });
  EXPECT_NE(msg.find("--device nodevice-test with 2 MPI ranks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run a single rank"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
}

TEST(DeviceCommunicator, SeveralRanksUseTheRegisteredCommunicator) {
  auto cpu = ops::make_backend("cpu", 1);
  int calls = 0;
  dist::register_device_communicator("fakedev-test", [&](std::unique_ptr<dist::Communicator> host, ops::Backend& be) {
    ++calls;
    EXPECT_EQ(&be, cpu.get());
    EXPECT_EQ(host->size(), 3);
    return std::unique_ptr<dist::Communicator>(std::make_unique<FakeRanks>(30));
  });
  auto comm = dist::communicator_for_device("fakedev-test", std::make_unique<FakeRanks>(3), *cpu);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(comm->size(), 30);
}

#ifdef FTX_HAVE_CUDA
// A CUDA build registers its communicator: in a build without NCCL it refuses several ranks with
// the reason, before anything reaches MPI (with NCCL it would bootstrap NCCL, which needs ranks).
TEST(DeviceCommunicator, CudaIsRegistered) {
#ifndef FTX_HAVE_NCCL
  auto cpu = ops::make_backend("cpu", 1);
  const std::string msg =
      error_of([&] { dist::communicator_for_device("cuda", std::make_unique<FakeRanks>(2), *cpu); });
  EXPECT_NE(msg.find("--device cuda with 2 MPI ranks: this ftx was built without NCCL"), std::string::npos) << msg;
#endif
  EXPECT_NE(ops::find_backend_factory("cuda"), nullptr);
}
#else
TEST(DeviceCommunicator, CudaIsNotRegisteredWithoutCuda) {
  EXPECT_EQ(ops::find_backend_factory("cuda"), nullptr);
  const std::string msg = error_of([] { ops::make_backend("cuda", 1); });
  EXPECT_NE(msg.find("the CUDA backend is not built in this version"), std::string::npos) << msg;
}
#endif

// The CPU backend arrives through the registry like the CUDA one (ops/ names no backend): its
// registration (lib/cpu/cpu_registration.cc) is linked into every executable by ftx_runtime.
TEST(BackendRegistry, TheCpuBackendIsRegistered) {
  ASSERT_NE(ops::find_backend_factory("cpu"), nullptr);
  const auto names = ops::registered_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  auto be = ops::make_backend("cpu", 1);
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->name(), "cpu");
}

TEST(BackendRegistry, MakeBackendUsesARegisteredFactory) {
  int threads_seen = -1;
  ops::register_backend("fakedev-test", [&](const ops::BackendOptions& o) {
    threads_seen = o.threads;
    return ops::make_backend("cpu", o.threads);  // any backend will do
  });
  auto be = ops::make_backend("fakedev-test", 3);
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_EQ(threads_seen, 3);
  const std::string msg = error_of([] { ops::make_backend("nodevice-test", 1); });
  EXPECT_NE(msg.find("--device nodevice-test: unknown device (expected cpu or "), std::string::npos) << msg;
}

}  // namespace
}  // namespace ftx
