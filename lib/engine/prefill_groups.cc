#include "lib/engine/prefill_groups.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace ftx {

namespace {
constexpr int64_t kMaxRows = 1024;
}  // namespace

std::vector<std::vector<int64_t>> prefill_groups(const std::vector<int64_t>& lengths, int64_t pass_tokens) {
  const int64_t n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  // best[i]: the least cost of the first i sorted rows; a call of sorted rows j..i-1 costs
  // (i - j) · lengths[order[j]] (its first is its longest) + pass_tokens. Calls of more than
  // kMaxRows rows are not tried, which bounds the work at any batch size (exact below it).
  std::vector<int64_t> best(static_cast<size_t>(n + 1), std::numeric_limits<int64_t>::max()), cut(static_cast<size_t>(n + 1), 0);
  best[0] = 0;
  for (int64_t i = 1; i <= n; ++i)
    for (int64_t j = std::max<int64_t>(0, i - kMaxRows); j < i; ++j) {
      const int64_t cost = best[j] + (i - j) * lengths[order[j]] + pass_tokens;
      if (cost < best[i]) {
        best[i] = cost;
        cut[i] = j;
      }
    }
  std::vector<std::vector<int64_t>> groups;
  for (int64_t i = n; i > 0; i = cut[i]) {
    std::vector<int64_t> g(order.begin() + cut[i], order.begin() + i);
    std::sort(g.begin(), g.end());
    groups.push_back(std::move(g));
  }
  std::reverse(groups.begin(), groups.end());
  return groups;
}

int64_t largest_group_tokens(const std::vector<int64_t>& lengths, const std::vector<std::vector<int64_t>>& groups) {
  int64_t most = 0;
  for (const auto& g : groups) {
    int64_t longest = 0;
    for (int64_t i : g) longest = std::max(longest, lengths[i]);
    most = std::max(most, static_cast<int64_t>(g.size()) * longest);
  }
  return most;
}

}  // namespace ftx
