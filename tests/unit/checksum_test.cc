// crc32_bytes is zlib's CRC-32 (what Python's zlib.crc32 computes over a manifest's files).
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>
#include <vector>

#include "formats/checksum.h"

namespace ftx {
namespace {

TEST(Crc32Bytes, StandardCheckValue) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32_bytes(s.data(), s.size()), 0xCBF43926u);
  EXPECT_EQ(crc32_bytes(nullptr, 0), 0u);
}

TEST(Crc32Bytes, EqualsZlibOnRandomBuffers) {
  std::mt19937 rng(7);
  for (size_t n : {1u, 15u, 16u, 63u, 64u, 1000u, 65537u, 1u << 20}) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    EXPECT_EQ(crc32_bytes(b.data(), n), static_cast<uint32_t>(crc32(0L, b.data(), static_cast<uInt>(n)))) << n;
  }
}

}  // namespace
}  // namespace ftx
