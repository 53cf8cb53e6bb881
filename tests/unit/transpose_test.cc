// transpose_matrix against the definition dst[c][r] = src[r][c], on shapes that exercise the
// vector blocks, the tile edges and matrices smaller than one block; transpose_block on blocks of
// wider matrices.
#include <gtest/gtest.h>

#include <array>
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

// transpose_block writes an R x C block of a wider source into a wider destination, touching
// nothing outside it (odd strides and offsets: the tiles' edges and the prefetch's bounds).
template <class T>
void check_block(int64_t R, int64_t C, int64_t ss, int64_t ds) {
  std::mt19937 rng(static_cast<uint32_t>(R * 7919 + C * 31 + ss));
  std::vector<T> src(static_cast<size_t>(R * ss)), dst(static_cast<size_t>(C * ds + 3), T(7));
  for (auto& v : src) v = static_cast<T>(rng());
  transpose_block(reinterpret_cast<const uint8_t*>(src.data()), R, C, ss, sizeof(T),
                  reinterpret_cast<uint8_t*>(dst.data() + 1), ds);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < ds; ++r) {
      const T want = r < R ? src[r * ss + c] : T(7);
      ASSERT_EQ(dst[1 + c * ds + r], want) << sizeof(T) << "-byte " << R << "x" << C << " at " << r << "," << c;
    }
  EXPECT_EQ(dst[0], T(7));
  EXPECT_EQ(dst[dst.size() - 2], T(7));
}

TEST(TransposeBlock, StridedBlocksMatchDefinition) {
  const std::vector<std::array<int64_t, 4>> cases = {
      {1, 1, 1, 1}, {8, 8, 8, 8}, {8, 8, 13, 11}, {5, 3, 9, 6}, {64, 64, 70, 65}, {65, 129, 131, 67}, {200, 17, 40, 203}};
  for (auto [R, C, ss, ds] : cases) {
    check_block<uint16_t>(R, C, ss, ds);
    check_block<uint32_t>(R, C, ss, ds);
  }
}

TEST(TransposeMatrix, RejectsOtherElementSizes) {
  uint8_t a[8] = {}, b[8] = {};
  EXPECT_THROW(transpose_matrix(a, 2, 4, 1, b), Error);
  EXPECT_THROW(transpose_matrix(a, 1, 1, 8, b), Error);
  EXPECT_THROW(transpose_block(a, 1, 1, 1, 8, b, 1), Error);
}

}  // namespace
}  // namespace ftx
