// Every op of the backend interface on every backend this build has (the frame and the backends:
// backend_ops/backend_ops.h; the op tests: backend_ops/*_ops.cc, one file per family of ops). Here:
// the suite's instantiation over the backends, and the check that it covers the interface: every
// virtual of ops::Backend (and its base decoding::LogitsDevice), read from the headers, named by
// some op test, no test naming an op the interface lacks, every op test instantiated on every
// backend. It prints "N ops × M backends" and the tests of each op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lib/cpu/cpu_features.h"
#include "unit/backend_ops/backend_ops.h"

namespace ftx::test {
namespace {

INSTANTIATE_TEST_SUITE_P(On, BackendOps, ::testing::ValuesIn(backend_specs()),
                         [](const ::testing::TestParamInfo<BackendSpec>& info) { return info.param.name; });

std::string joined(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s.empty() ? "(none)" : s;
}

TEST(BackendOpsCoverage, EveryOpRunsOnEveryBackend) {
  const std::vector<std::string> ops = interface_ops();
  ASSERT_GE(ops.size(), 30u) << "the interface's virtuals were not read: " << joined(ops);
  std::map<std::string, std::vector<std::string>> tests_of;
  for (const auto& [test, names] : declared_op_tests())
    for (const auto& op : names) tests_of[op].push_back(test);
  std::vector<std::string> uncovered, unknown;
  for (const auto& op : ops)
    if (!tests_of.count(op)) uncovered.push_back(op);
  for (const auto& [op, tests] : tests_of)
    if (!std::binary_search(ops.begin(), ops.end(), op)) unknown.push_back(op + " (" + joined(tests) + ")");

  // The instances gtest holds: "Test/backend" of the suite On/BackendOps.
  std::set<std::string> instances;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    if (std::string(suite.name()) != "On/BackendOps") continue;
    for (int j = 0; j < suite.total_test_count(); ++j) instances.insert(suite.GetTestInfo(j)->name());
  }
  const std::vector<BackendSpec> specs = backend_specs();
  std::vector<std::string> backends, missing;
  for (const auto& s : specs)
    backends.push_back(s.cpu ? s.name + " at " + cpu::cpu_isa_name(cpu::cpu_isa()) : s.name);
  for (const auto& [test, names] : declared_op_tests())
    for (const auto& s : specs)
      if (!instances.count(test + "/" + s.name)) missing.push_back(test + "/" + s.name);
  const bool cuda_built = std::any_of(specs.begin(), specs.end(), [](const BackendSpec& s) { return !s.cpu; });

  std::printf("backend ops: %zu ops × %zu backends (%s) = %zu op-backend pairs, in %zu op tests\n", ops.size(),
              specs.size(), joined(backends).c_str(), ops.size() * specs.size(), declared_op_tests().size());
  if (cuda_built && !have_cuda_device())
    std::printf("  (cuda is built but this machine has no device: its instances skip, label gpu)\n");
  for (const auto& op : ops)
    std::printf("  %-24s %s\n", op.c_str(), tests_of.count(op) ? joined(tests_of[op]).c_str() : "NOT COVERED");
  std::printf("ops not covered: %s\n", joined(uncovered).c_str());
  EXPECT_TRUE(uncovered.empty()) << "ops of the interface no op test covers: " << joined(uncovered);
  EXPECT_TRUE(unknown.empty()) << "op tests name ops the interface lacks: " << joined(unknown);
  EXPECT_TRUE(missing.empty()) << "op tests not instantiated on every backend: " << joined(missing);
}

}  // namespace
}  // namespace ftx::test
