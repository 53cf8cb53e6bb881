// transpose_matrix against the definition dst[c][r] = src[r][c], on shapes that exercise the
// vector blocks, the tile edges and matrices smaller than one block.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "formats/error.h"
#include "lib/util/transpose.h"

namespace ftx {
namespace {

template <class T>
void check(int64_t R, int64_t C) {
  std::mt19937 rng(static_cast<uint32_t>(R * 1000 + C));
  std::vector<T> src(static_cast<size_t>(R * C)), dst(src.size(), 0);
  for (auto& v : src) v = static_cast<T>(rng());
  transpose_matrix(reinterpret_cast<const uint8_t*>(src.data()), R, C, sizeof(T), reinterpret_cast<uint8_t*>(dst.data()));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      ASSERT_EQ(dst[c * R + r], src[r * C + c]) << sizeof(T) << "-byte " << R << "x" << C << " at " << r << "," << c;
}

TEST(TransposeMatrix, MatchesDefinition) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1}, {1, 17}, {17, 1}, {3, 5}, {8, 8}, {4, 4}, {9, 7}, {128, 128}, {257, 65}, {256, 64}, {600, 300}, {3072, 8}};
  for (auto [R, C] : shapes) {
    check<uint16_t>(R, C);
    check<uint32_t>(R, C);
  }
}

TEST(TransposeMatrix, RejectsOtherElementSizes) {
  uint8_t a[8] = {}, b[8] = {};
  EXPECT_THROW(transpose_matrix(a, 2, 4, 1, b), Error);
  EXPECT_THROW(transpose_matrix(a, 1, 1, 8, b), Error);
}

}  // namespace
}  // namespace ftx
