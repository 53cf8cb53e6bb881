// The FP8 E4M3 codec (formats/fp8_e4m3.h) against ml_dtypes 0.5.1 (pinned in scripts/requirements/
// test.txt), the package index's float8 types for numpy, through the fixtures of
// scripts/fixtures/make_e4m3_table.py (run under the test venv, FTX_TEST_PYTHON, cached by its stamp):
//  * every float32 bit pattern (all 2^32) against the rounding boundaries ml_dtypes' conversion has
//    (saturating: ml_dtypes of the value clipped to ±448), NaNs and both signs included;
//  * a sample of every class (zeros, float32 subnormals, E4M3 subnormals and normals, exact ties and
//    their neighbours, overflow, infinities, NaN payloads, 2^22 random patterns) against the codes
//    ml_dtypes itself gave, bit for bit;
//  * the 256 codes widened, against ml_dtypes' widening.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/fp8_e4m3.h"
#include "lib/model/fp8_files.h"
#include "lib/quant/fp8.h"

namespace ftx {
namespace {

std::string env_or(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}

// $FTX_FIXTURES/fp8-e4m3, made on first use.
std::string table_dir() {
  const std::string dir = env_or("FTX_FIXTURES", "/tmp") + "/fp8-e4m3";
  const std::string cmd = env_or("FTX_TEST_PYTHON", "python3") + " " + env_or("FTX_SOURCE_DIR", ".") +
                          "/scripts/fixtures/make_e4m3_table.py " + dir;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

template <typename T>
std::vector<T> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

uint8_t encode_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return float_to_e4m3(f);
}

TEST(Fp8E4M3, EveryFloat32AgainstMlDtypesBoundaries) {
  const std::vector<uint32_t> b = read_all<uint32_t>(table_dir() + "/boundaries.bin");
  ASSERT_EQ(b.size(), 126u);
  ASSERT_TRUE(std::is_sorted(b.begin(), b.end()));
  // Non-negative magnitudes in order: the code is the number of boundaries passed; the same
  // magnitude with the sign bit set must give the code | 0x80. Chunks run in parallel.
  constexpr uint32_t kInf = 0x7f800000u;
  constexpr int64_t kChunks = 256;
  constexpr int64_t kSpan = (int64_t(1) << 31) / kChunks;
  int64_t wrong = 0;
  uint32_t first_wrong = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : wrong)
  for (int64_t c = 0; c < kChunks; ++c) {
    const uint32_t lo = static_cast<uint32_t>(c * kSpan), hi = static_cast<uint32_t>((c + 1) * kSpan - 1);
    size_t code = static_cast<size_t>(std::upper_bound(b.begin(), b.end(), lo) - b.begin());
    int64_t here = 0;
    uint32_t at = 0;
    for (uint32_t a = lo;; ++a) {
      while (code < b.size() && b[code] <= a) ++code;
      const uint8_t want = a > kInf ? 0x7f : static_cast<uint8_t>(code);
      const bool bad = encode_bits(a) != want || encode_bits(a | 0x80000000u) != (want | 0x80);
      if (bad && here++ == 0) at = a;
      if (a == hi) break;
    }
    if (here) {
#pragma omp critical
      if (!wrong || at < first_wrong) first_wrong = at;
    }
    wrong += here;
  }
  EXPECT_EQ(wrong, 0) << "magnitudes encoded unlike ml_dtypes, the first " << std::hex << first_wrong << ": "
                      << int(encode_bits(first_wrong));
}

TEST(Fp8E4M3, SampleOfEveryClassEqualsMlDtypes) {
  const std::string dir = table_dir();
  std::ifstream in(dir + "/sample.bin", std::ios::binary);
  ASSERT_TRUE(in.good());
  const auto classes = nlohmann::json::parse(std::ifstream(dir + "/classes.json"));
  int64_t n = 0, wrong = 0;
  char rec[5];
  std::string first;
  while (in.read(rec, 5)) {
    uint32_t bits;
    std::memcpy(&bits, rec, 4);
    const uint8_t want = static_cast<uint8_t>(rec[4]), got = encode_bits(bits);
    ++n;
    if (got != want && wrong++ == 0) {
      char msg[96];
      std::snprintf(msg, sizeof msg, "%#010x: ftx %#04x, ml_dtypes %#04x", bits, got, want);
      first = msg;
    }
  }
  int64_t expected = 0;
  for (auto& [name, count] : classes.at("classes").items()) expected += count.get<int64_t>();
  EXPECT_EQ(n, expected);
  EXPECT_EQ(wrong, 0) << first;
  std::printf("%lld float32 values of every class equal ml_dtypes %s bit for bit (%s)\n", static_cast<long long>(n),
              classes.at("ml_dtypes").get<std::string>().c_str(), classes.at("classes").dump().c_str());
}

TEST(Fp8E4M3, DecodeEqualsMlDtypes) {
  const std::vector<float> want = read_all<float>(table_dir() + "/decode.bin");
  ASSERT_EQ(want.size(), 256u);
  for (int q = 0; q < 256; ++q) {
    const float got = e4m3_to_float(static_cast<uint8_t>(q));
    if (std::isnan(want[q])) {
      EXPECT_TRUE(std::isnan(got)) << q;
    } else {
      uint32_t a, b;
      std::memcpy(&a, &got, 4);
      std::memcpy(&b, &want[q], 4);
      EXPECT_EQ(a, b) << "code " << q << ": " << got << " vs " << want[q];
    }
  }
  // Round trip: every finite code encodes back to itself.
  for (int q = 0; q < 256; ++q)
    if (!std::isnan(want[q])) EXPECT_EQ(float_to_e4m3(want[q]), q) << q;
}

TEST(Fp8E4M3, Scales) {
  EXPECT_EQ(quant::fp8_scale_of(448.0), 1.0f);
  EXPECT_EQ(quant::fp8_scale_of(3.0), 3.0f / 448.0f);
  EXPECT_EQ(quant::fp8_scale_of(0.0), static_cast<float>(1e-8 / 448.0));  // floored amax
  const float w[] = {1.0f, -2.0f, 0.5f, 448.0f * 2.0f};
  uint8_t q[4];
  quant::quantize_e4m3(w, 4, 2.0f, q);
  EXPECT_EQ(q[0], float_to_e4m3(0.5f));
  EXPECT_EQ(q[1], float_to_e4m3(-1.0f));
  EXPECT_EQ(q[3], 0x7e);  // 448: the tensor's amax lands on the largest code
}

TEST(Fp8E4M3, SideFileNames) {
  const std::string g = "model.layers.3.attention.query_key_value";
  EXPECT_TRUE(is_fp8_side_file(fp8_weight_name(g) + ".1.bin"));
  EXPECT_TRUE(is_fp8_side_file(fp8_weight_scale_name(g) + ".bin"));
  EXPECT_TRUE(is_fp8_side_file(fp8_act_scale_name(g) + ".bin"));
  EXPECT_TRUE(is_fp8_side_file(fp8_kv_scale_name(3) + ".bin"));
  EXPECT_FALSE(is_fp8_side_file(g + ".weight.0.bin"));
  EXPECT_FALSE(is_fp8_side_file(g + ".weight.fp8.bin"));
  EXPECT_FALSE(is_fp8_side_file("model.wte.bin"));
}

}  // namespace
}  // namespace ftx
