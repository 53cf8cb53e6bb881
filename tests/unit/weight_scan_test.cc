// The checks on every weight file (formats/weight_scan.h, lib/engine/weight_checks.h): non-finite
// values in each floating-point dtype, found at any position (chunk and piece boundaries included),
// and the CRC-32 of a file scanned in pieces against zlib's over the whole.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "formats/checksum.h"
#include "formats/error.h"
#include "formats/weight_scan.h"
#include "lib/engine/weight_checks.h"

namespace ftx {
namespace {

uint32_t zlib_crc(const std::vector<uint8_t>& b) {
  uLong c = crc32(0L, Z_NULL, 0);
  for (size_t off = 0; off < b.size(); off += 1u << 30)
    c = crc32(c, b.data() + off, static_cast<uInt>(std::min<size_t>(1u << 30, b.size() - off)));
  return static_cast<uint32_t>(c);
}

// Random finite values of a dtype, as bytes: every encoding except the non-finite ones.
std::vector<uint8_t> finite_bytes(DType t, size_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(n * dtype_size(t));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& x : b) x = static_cast<uint8_t>(byte(rng));
  for (size_t i = 0; i < n; ++i) {
    uint8_t* e = b.data() + i * dtype_size(t);
    // Clear the exponent's top bit: never all ones.
    switch (t) {
      case DType::kFloat32: e[3] &= 0xbf; break;
      case DType::kFloat16: e[1] &= 0xbf; break;
      case DType::kBFloat16: e[1] &= 0xbf; break;
      case DType::kFloat64: e[7] &= 0xbf; break;
      case DType::kFloat8E5M2: case DType::kFloat8E4M3: e[0] &= 0xbf; break;
      default: break;
    }
  }
  return b;
}

void put_nonfinite(DType t, uint8_t* e, bool inf) {
  switch (t) {
    case DType::kFloat32: {
      const float v = inf ? -std::numeric_limits<float>::infinity() : std::nanf("");
      std::memcpy(e, &v, 4);
      break;
    }
    case DType::kFloat64: {
      const double v = inf ? std::numeric_limits<double>::infinity() : std::nan("");
      std::memcpy(e, &v, 8);
      break;
    }
    case DType::kFloat16: e[0] = inf ? 0x00 : 0x01, e[1] = inf ? 0x7c : 0xfe; break;
    case DType::kBFloat16: e[0] = inf ? 0x80 : 0xc0, e[1] = inf ? 0xff : 0x7f; break;
    case DType::kFloat8E5M2: e[0] = inf ? 0x7c : 0xfe; break;
    case DType::kFloat8E4M3: e[0] = 0xff; break;  // E4M3fn: no infinity; S.1111.111 is NaN
    default: break;
  }
}

TEST(WeightScan, FindsNonFiniteValuesInEveryFloatDtype) {
  std::mt19937 rng(3);
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kFloat8E5M2,
                          DType::kFloat8E4M3};
  for (DType t : dtypes) {
    const size_t n = (size_t(1) << 20) / dtype_size(t) + 37;  // several 256 KiB chunks and a tail
    auto b = finite_bytes(t, n, rng);
    WeightScan s = scan_weight_bytes(b.data(), b.size(), t, true);
    EXPECT_EQ(s.nonfinite, 0) << dtype_name(t);
    EXPECT_EQ(s.crc32, zlib_crc(b)) << dtype_name(t);
    // One at the last element of the first chunk, one at the very end, one in between.
    const size_t el = dtype_size(t);
    const size_t at[] = {(size_t(256) << 10) / el - 1, n / 2, n - 1};
    for (size_t k = 0; k < 3; ++k) put_nonfinite(t, b.data() + at[k] * el, k == 1);
    s = scan_weight_bytes(b.data(), b.size(), t, false);
    EXPECT_EQ(s.nonfinite, 3) << dtype_name(t);
    EXPECT_EQ(s.first_nonfinite, static_cast<int64_t>(at[0])) << dtype_name(t);
  }
}

TEST(WeightScan, IntegerDtypesAreOnlyChecksummed) {
  std::vector<uint8_t> b(1000, 0xff);
  const WeightScan s = scan_weight_bytes(b.data(), b.size(), DType::kInt8, true);
  EXPECT_EQ(s.nonfinite, 0);
  EXPECT_EQ(s.crc32, zlib_crc(b));
  EXPECT_FALSE(scans_nonfinite(DType::kInt8));
}

// check_weight_bytes splits a file into 8 MiB pieces on several threads: the combined checksum
// is the file's, and the first bad element's index is the file's.
TEST(WeightChecks, PiecesGiveTheWholeFilesChecksumAndPosition) {
  std::mt19937 rng(5);
  const size_t n = (size_t(8) << 20) * 3 / 4 + 11;  // fp32: three pieces and a tail
  auto b = finite_bytes(DType::kFloat32, n, rng);
  FtManifestEntry e;
  e.file = "model.wte.bin";
  e.crc32 = zlib_crc(b);
  EXPECT_NO_THROW(check_weight_bytes("d/model.wte.bin", b.data(), b.size(), DType::kFloat32, &e, "d"));
  e.crc32 = *e.crc32 ^ 1u;
  try {
    check_weight_bytes("d/model.wte.bin", b.data(), b.size(), DType::kFloat32, &e, "d");
    FAIL() << "a wrong checksum passes";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("d/model.wte.bin: checksum"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("ftx inspect --verify d"), std::string::npos) << err.what();
  }
  const size_t bad = (size_t(8) << 20) / 4 * 2 + 5;  // in the third piece
  put_nonfinite(DType::kFloat32, b.data() + bad * 4, false);
  put_nonfinite(DType::kFloat32, b.data() + (n - 1) * 4, true);
  try {
    check_weight_bytes("d/x.bin", b.data(), b.size(), DType::kFloat32, nullptr, "d");
    FAIL() << "NaN passes";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("2 non-finite values (NaN or Inf; the first at element " + std::to_string(bad)),
              std::string::npos)
        << err.what();
  }
}

TEST(Crc32Combine, EqualsTheChecksumOfTheConcatenation) {
  std::vector<uint8_t> a(1000), b(3333);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 13 + 1);
  std::vector<uint8_t> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  EXPECT_EQ(crc32_combine(crc32_bytes(a.data(), a.size()), crc32_bytes(b.data(), b.size()), b.size()), zlib_crc(ab));
}

}  // namespace
}  // namespace ftx
