// Linked into every unit-test executable: a --gtest_filter (or GTEST_FILTER) with a positive
// pattern that names no test of the executable fails the run (exit 1) before any test runs.
// Otherwise a renamed or removed test drops out of a filtered ctest entry, or of a script's gtest
// run, which then passes on what is left, or on nothing at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// gtest's filter patterns: '*' any string, '?' any one character.
bool glob(const char* p, const char* s) {
  if (*p == '\0') return *s == '\0';
  if (*p == '*') return glob(p + 1, s) || (*s != '\0' && glob(p, s + 1));
  return *s != '\0' && (*p == '?' || *p == *s) && glob(p + 1, s + 1);
}

std::vector<std::string> positive_patterns(const std::string& filter) {
  const std::string positive = filter.substr(0, filter.find('-'));
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= positive.size()) {
    const size_t end = std::min(positive.find(':', start), positive.size());
    if (end > start) out.push_back(positive.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

class FilterMatchesTests : public ::testing::EmptyTestEventListener {
  void OnTestIterationStart(const ::testing::UnitTest& unit, int) override {
    std::string unmatched;
    for (const std::string& pattern : positive_patterns(GTEST_FLAG_GET(filter))) {
      bool any = false;
      for (int i = 0; i < unit.total_test_suite_count() && !any; ++i) {
        const ::testing::TestSuite* suite = unit.GetTestSuite(i);
        for (int j = 0; j < suite->total_test_count() && !any; ++j) {
          const ::testing::TestInfo* t = suite->GetTestInfo(j);
          any = glob(pattern.c_str(), (std::string(t->test_suite_name()) + "." + t->name()).c_str());
        }
      }
      if (!any) unmatched += (unmatched.empty() ? "" : ", ") + pattern;
    }
    if (unmatched.empty()) return;
    std::fprintf(stderr, "--gtest_filter=%s: no test matches %s\n", GTEST_FLAG_GET(filter).c_str(), unmatched.c_str());
    std::fflush(stdout);
    std::exit(1);
  }
};

const bool kFilterChecked = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new FilterMatchesTests);
  return true;
}();

}  // namespace
