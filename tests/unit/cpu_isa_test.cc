// The CPU kernels' instruction-set levels (issue 40; lib/cpu/cpu_features.h): the AVX2 forms of the
// widening GEMM give the very bits of the AVX-512 forms for layer matrices (each output one FMA
// chain over k in order at both levels), for every weight type, row count and width, K whole or in
// pieces; the W8A8 int8 product is exact at every level, also at the extremes of both operands,
// where a naive vpmaddubsw would saturate; FTX_CPU_ISA caps the level, names a bad value, and
// `ftx --version` says which level runs. (Each level's results against float64 references are
// the other CPU tests, run at every level by ctest's cpu-isa labels.)
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "formats/dtype.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/vnni_int8_gemm.h"
#include "lib/cpu/vnni_int8_levels.h"
#include "lib/cpu/widening_gemm.h"
#include "lib/cpu/widening_levels.h"
#include "lib/quant/fp8.h"

namespace ftx {
namespace {

// B's elements of `type` for a [K, N] matrix (row stride N), from one random fp32 matrix.
std::vector<uint8_t> narrow_matrix(cpu::NarrowType type, const std::vector<float>& w) {
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  for (float v : w) switch (type) {
      case cpu::NarrowType::kFp32: put(&v, 4); break;
      case cpu::NarrowType::kFp16: { const uint16_t h = float_to_half(v); put(&h, 2); break; }
      case cpu::NarrowType::kBf16: { const uint16_t h = float_to_bf16(v); put(&h, 2); break; }
      case cpu::NarrowType::kInt8: { const int8_t q = static_cast<int8_t>(std::lround(v * 40.0f)); put(&q, 1); break; }
      case cpu::NarrowType::kFp8E4M3: { const uint8_t q = quant::float_to_e4m3(v); put(&q, 1); break; }
    }
  return out;
}

TEST(CpuIsaLevelsOnAvx512, Avx2WideningSumsEqualAvx512ForLayerMatrices) {
  if (cpu::detected_cpu_isa() < cpu::CpuIsa::kAvx512) GTEST_SKIP() << "needs a CPU with AVX-512";
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  using T = cpu::NarrowType;
  struct Shape {
    int64_t M, K, nn, ldb;
  };
  // One row over a whole panel (256, 192; wider than AVX2's registers hold, so its sums go through
  // L1) and narrower blocks, K not a multiple of the four rows read per pass; groups of rows; K in pieces
  // (1100 rows of 256 fp32 columns: past the 256 KB piece); the tile kernel's many rows, with
  // widths that are not a multiple of either level's lanes, and K in several of its chunks at
  // each level (AVX2's 256 rows, AVX-512's 1024).
  const Shape shapes[] = {{1, 70, 256, 256}, {1, 300, 192, 256}, {1, 1100, 256, 256}, {1, 50, 7, 9}, {1, 37, 203, 210},
                          {2, 90, 200, 256}, {3, 64, 100, 130}, {4, 1100, 256, 256}, {7, 33, 77, 80},
                          {16, 700, 256, 256}, {17, 64, 256, 300}, {40, 31, 70, 70}, {64, 96, 200, 256},
                          {20, 2100, 250, 256}};
  for (T type : {T::kFp32, T::kFp16, T::kBf16, T::kInt8, T::kFp8E4M3})
    for (const Shape& s : shapes) {
      SCOPED_TRACE(::testing::Message() << "type " << static_cast<int>(type) << " M=" << s.M << " K=" << s.K
                                        << " nn=" << s.nn);
      std::vector<float> a(s.M * s.K), w(s.K * s.ldb);
      for (auto& v : a) v = nd(rng);
      for (auto& v : w) v = 0.1f * nd(rng);
      const std::vector<uint8_t> b = narrow_matrix(type, w);
      std::vector<float> strip(std::max(cpu::avx512::widening_scratch_floats(s.M, s.K), cpu::avx2::widening_scratch_floats(s.M, s.K)));
      std::vector<float> c512(s.M * s.nn, 0.0f), c2(s.M * s.nn, 0.0f);
      cpu::avx512::widening_block(type, s.M, s.K, a.data(), b.data(), s.ldb, false, s.nn, c512.data(), strip.data());
      cpu::avx2::widening_block(type, s.M, s.K, a.data(), b.data(), s.ldb, false, s.nn, c2.data(), strip.data());
      int64_t differ = 0;
      for (size_t i = 0; i < c2.size(); ++i) differ += std::memcmp(&c2[i], &c512[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0) << "of " << c2.size();
      // And the sums are sums: the largest against a float64 evaluation of the same products.
      double worst = 0, largest = 1e-30;
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t j = 0; j < s.nn; ++j) {
          double want = 0;
          for (int64_t k = 0; k < s.K; ++k) {
            const uint8_t* e = b.data() + (k * s.ldb + j) * (type == T::kFp32 ? 4 : type == T::kInt8 || type == T::kFp8E4M3 ? 1 : 2);
            double x = 0;
            switch (type) {
              case T::kFp32: { float f; std::memcpy(&f, e, 4); x = f; break; }
              case T::kFp16: { uint16_t h; std::memcpy(&h, e, 2); x = half_to_float(h); break; }
              case T::kBf16: { uint16_t h; std::memcpy(&h, e, 2); x = bf16_to_float(h); break; }
              case T::kInt8: x = static_cast<int8_t>(*e); break;
              case T::kFp8E4M3: x = quant::e4m3_to_float(*e); break;
            }
            want += static_cast<double>(a[m * s.K + k]) * x;
          }
          worst = std::max(worst, std::fabs(c2[m * s.nn + j] - want));
          largest = std::max(largest, std::fabs(want));
        }
      EXPECT_LE(worst, 1e-5 * largest);
    }
}

// VnniActivations over q[M, K] (row-major, K unpadded): padded copy and row sums.
struct Activations {
  std::vector<int8_t> q;
  std::vector<int32_t> sums;
  cpu::VnniActivations op;
  Activations(const std::vector<int8_t>& a, int64_t M, int64_t K) {
    const int64_t K4 = cpu::vnni_padded_k(K);
    q.assign(M * K4, 0);
    sums.assign(M, 0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        q[m * K4 + k] = a[m * K + k];
        sums[m] += a[m * K + k];
      }
    op = {q.data(), sums.data(), M, K};
  }
};

TEST(CpuIsaLevels, W8A8ProductIsExactAtEveryLevel) {
  if (cpu::detected_cpu_isa() < cpu::CpuIsa::kAvx2) GTEST_SKIP() << "needs a CPU with AVX2";
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> any(-128, 127), edge(0, 3);
  const int64_t N = 300;  // two panels: 256 and 44 columns (the last 4 of each in portable code)
  for (const int64_t M : {1, 3, 4, 6, 13})
    for (const int64_t K : {5, 64, 517}) {
      SCOPED_TRACE(::testing::Message() << "M=" << M << " K=" << K);
      std::vector<int8_t> a(M * K), w(K * N);
      // Half the values at the extremes: -128 and 127 on both sides (the products a pair of
      // vpmaddubsw lanes would saturate on: 255 · -128 · 2), half anywhere.
      auto value = [&] { const int e = edge(rng); return static_cast<int8_t>(e == 0 ? -128 : e == 1 ? 127 : any(rng)); };
      for (auto& v : a) v = value();
      for (auto& v : w) v = value();
      std::vector<uint8_t> packed(cpu::vnni_packed_bytes(K, N));
      cpu::pack_int8_vnni(w.data(), K, N, packed.data());
      Activations act(a, M, K);
      std::vector<int32_t> want(M * N);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          int64_t s = 0;
          for (int64_t k = 0; k < K; ++k) s += int64_t{a[m * K + k]} * w[k * N + n];
          want[m * N + n] = static_cast<int32_t>(s);
        }
      std::vector<int32_t> portable(M * N);
      cpu::vnni_int8_product_portable(act.op, packed.data(), N, 0, N, portable.data());
      EXPECT_EQ(portable, want);
      // The AVX2 panel kernels alone, over each panel: what they cover must equal the exact sums.
      using PanelProduct = int64_t (*)(const cpu::VnniActivations&, const uint8_t*, int64_t, int64_t, int64_t,
                                       int32_t*, int64_t);
      std::vector<std::pair<const char*, PanelProduct>> kernels = {{"avx2", cpu::avx2::int8_panel_product}};
      if (__builtin_cpu_supports("avxvnni")) kernels.push_back({"avx-vnni", cpu::avx_vnni::int8_panel_product});
      const int64_t K4 = cpu::vnni_padded_k(K);
      for (const auto& [name, kernel] : kernels) {
        SCOPED_TRACE(name);
        for (const int64_t first : {int64_t(0), int64_t(256)}) {
          const int64_t width = std::min<int64_t>(256, N - first);
          std::vector<int32_t> out(M * width, 0);
          const int64_t done =
              kernel(act.op, packed.data() + first * K4, 4 * width, 0, width, out.data(), width);
          EXPECT_EQ(done, width / 8 * 8);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t j = 0; j < done; ++j) ASSERT_EQ(out[m * width + j], want[m * N + first + j]) << m << "," << j;
        }
      }
      // And through the dispatch at the level this process runs.
      std::vector<int32_t> level(M * N);
      cpu::vnni_int8_product(act.op, packed.data(), N, 0, N, level.data());
      EXPECT_EQ(level, want);
    }
}

// The dispatch of the W8A8 product for CPUs other than this one (cpu_features.h's rule, then
// vnni_int8_gemm.h's choice): AVX-VNNI's kernel is taken by an AVX2 CPU that has it (Alder Lake),
// uncapped or capped at its own level, and by no capped AVX-512 CPU (capped, a Sapphire Rapids runs
// what a Zen 3 runs); AVX512-VNNI's where the AVX-512 level has VNNI.
TEST(CpuIsaDispatch, Int8ProductKernelForEachCpu) {
  using K = cpu::Int8ProductKernel;
  using L = cpu::CpuIsa;
  cpu::CpuFeatures nehalem, zen3, alder_lake, skylake_x, sapphire_rapids;
  zen3.avx2 = zen3.fma = zen3.f16c = true;
  alder_lake = zen3;
  alder_lake.avx_vnni = true;
  skylake_x = zen3;
  skylake_x.avx512f = skylake_x.avx512bw = skylake_x.avx512vl = skylake_x.avx512dq = true;
  sapphire_rapids = skylake_x;
  sapphire_rapids.avx_vnni = sapphire_rapids.avx512_vnni = sapphire_rapids.avx512_bf16 = true;
  sapphire_rapids.amx_bf16 = true;
  struct Row {
    const char* cpu;
    const cpu::CpuFeatures& f;
    L cap;
    L level;
    K kernel;
  };
  const Row rows[] = {{"nehalem", nehalem, L::kAvx512, L::kBaseline, K::kPortable},
                      {"zen3", zen3, L::kAvx512, L::kAvx2, K::kAvx2Emulated},
                      {"zen3 at baseline", zen3, L::kBaseline, L::kBaseline, K::kPortable},
                      {"alder lake", alder_lake, L::kAvx512, L::kAvx2, K::kAvxVnni},
                      {"alder lake at avx2", alder_lake, L::kAvx2, L::kAvx2, K::kAvxVnni},
                      {"alder lake at baseline", alder_lake, L::kBaseline, L::kBaseline, K::kPortable},
                      {"skylake-x", skylake_x, L::kAvx512, L::kAvx512, K::kAvx2Emulated},
                      {"sapphire rapids", sapphire_rapids, L::kAvx512, L::kAvx512, K::kAvx512Vnni},
                      {"sapphire rapids at avx2", sapphire_rapids, L::kAvx2, L::kAvx2, K::kAvx2Emulated},
                      {"sapphire rapids at baseline", sapphire_rapids, L::kBaseline, L::kBaseline, K::kPortable}};
  auto name = [](K k) {
    return k == K::kAvx512Vnni ? "avx512-vnni" : k == K::kAvxVnni ? "avx-vnni" : k == K::kAvx2Emulated ? "avx2" : "portable";
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.cpu);
    const cpu::KernelFeatures k = cpu::kernel_features(r.f, r.cap);
    EXPECT_STREQ(cpu::cpu_isa_name(k.isa), cpu::cpu_isa_name(r.level));
    EXPECT_STREQ(name(cpu::int8_product_kernel(k)), name(r.kernel));
    // The extensions of the levels above a cap are off with it.
    EXPECT_EQ(k.avx512_bf16 || k.amx_bf16 || k.avx512_vnni, r.level == L::kAvx512 && r.f.avx512_vnni);
  }
}

// Only cpu_features.cc asks the CPU what it has: a kernel that dispatched on CPUID itself (or by
// GCC's target_clones, which asks when the binary loads) would run above a cap.
TEST(CpuIsaDispatch, OnlyCpuFeaturesAsksTheCpu) {
  const std::string src = std::getenv("FTX_SOURCE_DIR");
  const std::string cmd = "cd '" + src + "' && grep -rnE '__builtin_cpu_(supports|is|init)|target_clones|"
                          "__get_cpuid|cpuid\\.h|_may_i_use_cpu_feature' lib kernels cmd formats "
                          "| grep -v '^lib/cpu/cpu_features\\.cc:' | grep -vE '^[^:]*:[0-9]+:\\s*//'";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string hits;
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), p)) hits += buf.data();
  pclose(p);
  EXPECT_EQ(hits, "") << "these ask the CPU themselves; dispatch on cpu_features.h";
}

// `ftx --version` (FTX_BIN) with FTX_CPU_ISA set to `value`: its output and exit status.
std::pair<std::string, int> version_with_cap(const char* value) {
  const std::string cmd = std::string("FTX_CPU_ISA=") + value + " '" + std::getenv("FTX_BIN") + "' --version 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 256> buf;
  while (p && fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int rc = p ? pclose(p) : -1;
  return {out, rc};
}

TEST(CpuIsaCap, CapsTheLevelAndNamesABadValue) {
  const auto [base, rc] = version_with_cap("baseline");
  EXPECT_EQ(rc, 0);
  if (cpu::detected_cpu_isa() > cpu::CpuIsa::kBaseline)
    EXPECT_NE(base.find("cpu kernels: baseline (capped by FTX_CPU_ISA=baseline, the CPU has "), std::string::npos) << base;
  const auto [top, rc2] = version_with_cap("avx512");  // above the CPU's level: the CPU's level
  EXPECT_EQ(rc2, 0);
  EXPECT_NE(top.find(std::string("cpu kernels: ") + cpu::cpu_isa_name(cpu::detected_cpu_isa())), std::string::npos);
  EXPECT_EQ(top.find("capped"), std::string::npos) << top;
  // A command that runs kernels fails on a bad value, in one line, before any work.
  const std::string gpt2 = test::engine_fixtures() + "/gpt2";
  const std::string cmd = std::string("FTX_CPU_ISA=sse2 '") + std::getenv("FTX_BIN") + "' generate -m '" + gpt2 +
                          "/1-gpu' --input-ids '" + gpt2 + "/start_ids.csv' --max-new-tokens 2 --output - --quiet 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 256> buf;
  while (p && fgets(buf.data(), buf.size(), p)) out += buf.data();
  EXPECT_NE(pclose(p), 0);
  EXPECT_EQ(out, "ftx: error: FTX_CPU_ISA=sse2: expected baseline, avx2 or avx512\n");
}

// `ftx --version` too: the error line and exit 1, not the message as the version's kernel level
// and exit 0.
TEST(CpuIsaCap, I9_VersionRefusesABadValue) {
  for (const char* bad : {"garbage", "avx3", "AVX2"}) {
    const auto [out, rc] = version_with_cap(bad);
    EXPECT_EQ(out, std::string("ftx: error: FTX_CPU_ISA=") + bad + ": expected baseline, avx2 or avx512\n");
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1) << bad << ": status " << rc;
  }
}

}  // namespace
}  // namespace ftx
