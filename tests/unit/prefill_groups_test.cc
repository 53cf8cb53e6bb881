// lib/engine/prefill_groups: an admission's prompts cut into prefill calls at the least cost of
// padded tokens plus a pass over the weights per call, checked against every partition of small
// sets (not only the runs of the sorted order that the function searches).
#include "lib/engine/prefill_groups.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

namespace ftx {
namespace {

int64_t cost(const std::vector<int64_t>& lengths, const std::vector<std::vector<int64_t>>& groups, int64_t pass) {
  int64_t c = 0;
  for (const auto& g : groups) {
    int64_t longest = 0;
    for (int64_t i : g) longest = std::max(longest, lengths[i]);
    c += static_cast<int64_t>(g.size()) * longest + pass;
  }
  return c;
}

// The least cost over all set partitions of the indices (restricted growth strings).
int64_t brute_force(const std::vector<int64_t>& lengths, int64_t pass) {
  const size_t n = lengths.size();
  std::vector<int> label(n, 0);
  int64_t best = INT64_MAX;
  std::function<void(size_t, int)> walk = [&](size_t i, int used) {
    if (i == n) {
      std::vector<std::vector<int64_t>> groups(static_cast<size_t>(used));
      for (size_t j = 0; j < n; ++j) groups[static_cast<size_t>(label[j])].push_back(static_cast<int64_t>(j));
      best = std::min(best, cost(lengths, groups, pass));
      return;
    }
    for (int l = 0; l <= used; ++l) {
      label[i] = l;
      walk(i + 1, std::max(used, l + 1));
    }
  };
  walk(0, 0);
  return best;
}

void expect_each_index_once(const std::vector<std::vector<int64_t>>& groups, size_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& g : groups) {
    EXPECT_FALSE(g.empty());
    EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
    for (int64_t i : g) ++seen[static_cast<size_t>(i)];
  }
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

TEST(PrefillGroups, EqualPromptsShareOneCall) {
  const std::vector<int64_t> lengths(32, 109);
  const auto g = prefill_groups(lengths);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].size(), 32u);
  EXPECT_EQ(largest_group_tokens(lengths, g), 32 * 109);
}

TEST(PrefillGroups, ALongPromptIsNotPaddedForTheShortOnes) {
  // One 600-token prompt beside 31 of 10 tokens: one padded call would run 32 x 600 = 19200 tokens.
  std::vector<int64_t> lengths(32, 10);
  lengths[7] = 600;
  const auto g = prefill_groups(lengths);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], std::vector<int64_t>{7});
  EXPECT_EQ(g[1].size(), 31u);
  EXPECT_EQ(largest_group_tokens(lengths, g), 600);
  EXPECT_EQ(cost(lengths, g, kPrefillPassTokens), 600 + 310 + 2 * kPrefillPassTokens);
}

TEST(PrefillGroups, NoPromptsNoCalls) { EXPECT_TRUE(prefill_groups({}).empty()); }

TEST(PrefillGroups, CostIsTheLeastOverEveryPartition) {
  std::mt19937_64 rng(52);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 7;
    std::vector<int64_t> lengths(n);
    // Lengths from a few tokens to a few hundred, with ties.
    for (auto& l : lengths) l = trial % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 4) * 50 : 1 + static_cast<int64_t>(rng() % 400);
    for (const int64_t pass : {int64_t{0}, int64_t{16}, kPrefillPassTokens, int64_t{1000}}) {
      const auto g = prefill_groups(lengths, pass);
      expect_each_index_once(g, n);
      EXPECT_EQ(cost(lengths, g, pass), brute_force(lengths, pass)) << "trial " << trial << " pass " << pass;
    }
  }
}

TEST(PrefillGroups, ABatchJobsPromptsRunFarFewerTokensThanOnePaddedCall) {
  // Prompt lengths of chat traffic: lognormal, median about 70, a long tail.
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> draw(std::log(70.0), 1.3);
  std::vector<int64_t> lengths(256);
  int64_t real = 0;
  for (auto& l : lengths) real += l = std::clamp<int64_t>(static_cast<int64_t>(draw(rng)), 4, 1000);
  const auto g = prefill_groups(lengths);
  expect_each_index_once(g, lengths.size());
  const int64_t padded_one_call = 256 * *std::max_element(lengths.begin(), lengths.end());
  const int64_t padded = cost(lengths, g, 0);
  EXPECT_LT(padded, real + real / 4) << "at most a quarter more tokens than the prompts hold";
  EXPECT_LT(padded * 3, padded_one_call);
}

}  // namespace
}  // namespace ftx
