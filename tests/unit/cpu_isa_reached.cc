// Linked into the CPU kernel and engine test binaries that ctest runs again at each instruction-set
// level (tests/e2e/cpu_isa/cpu_isa.cmake): after their tests, a check that the level the run was
// meant to test is the level that ran, so that a kernel that dispatched on the CPU alone, or a cap that
// stopped reaching a library, cannot pass for a run at the lower level.
//   - Always: no ftx kernel ran above cpu_isa() (each kernel notes its level, cpu_features.h).
//   - With FTX_TEST_ISA=<level> (set by the capped runs beside FTX_CPU_ISA, and by the runs on an
//     emulated CPU): the ftx kernels that ran (the RMSNorm has no levels) ran at exactly that level;
//     oneDNN, once ftx has capped it, may use no instructions above it, and the bf16 matmul it picks
//     (DnnlMatmul::last_impl) names none (oneDNN 2.7 has no bf16 matmul below AVX-512: refusing one
//     is right there); OpenBLAS chose its kernels for a core of that level or below, the one
//     OPENBLAS_CORETYPE names where it is set.
// The level expected comes from the harness, never from cpu_isa(): a cap that stopped working
// would move both.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/dnnl_matmul.h"

extern "C" char* openblas_get_corename(void);

namespace ftx {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// OpenBLAS's cores (openblas_get_corename, lower case) whose kernels use AVX-512, and those that use
// AVX or AVX2 but not AVX-512; every other core's kernels are SSE only.
const std::vector<std::string> kAvx512Cores = {"skylakex", "cooperlake", "sapphirerapids"};
const std::vector<std::string> kAvxCores = {"sandybridge", "haswell",   "zen",      "bulldozer",
                                            "piledriver",  "steamroller", "excavator"};

bool among(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

void check_openblas(cpu::CpuIsa want) {
  const std::string core = lower(openblas_get_corename());
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  if (asked && *asked) EXPECT_EQ(core, lower(asked)) << "OpenBLAS did not take OPENBLAS_CORETYPE=" << asked;
  if (want < cpu::CpuIsa::kAvx512)
    EXPECT_FALSE(among(kAvx512Cores, core)) << "OpenBLAS runs its AVX-512 kernels (" << core << ") in a run at "
                                            << cpu::cpu_isa_name(want) << ": set OPENBLAS_CORETYPE";
  if (want < cpu::CpuIsa::kAvx2)
    EXPECT_FALSE(among(kAvxCores, core)) << "OpenBLAS runs its AVX kernels (" << core << ") in a run at "
                                         << cpu::cpu_isa_name(want) << ": set OPENBLAS_CORETYPE";
}

void check_onednn(cpu::CpuIsa want) {
  cpu::DnnlMatmul mm;  // caps oneDNN to cpu_isa(), as the CPU backend's first bf16 matmul does
  const auto most = want == cpu::CpuIsa::kBaseline ? dnnl::cpu_isa::sse41
                    : want == cpu::CpuIsa::kAvx2   ? dnnl::cpu_isa::avx2
                                                   : dnnl::cpu_isa::all;
  const auto effective = static_cast<uint32_t>(dnnl::get_effective_cpu_isa());
  if (most != dnnl::cpu_isa::all)
    EXPECT_EQ(effective & ~static_cast<uint32_t>(most), 0u)
        << "oneDNN may use ISA 0x" << std::hex << effective << " in a run at " << cpu::cpu_isa_name(want);
  // Names of oneDNN implementations (e.g. "brg:avx512_core_amx", "jit:avx2") above each level.
  const std::vector<std::string> above = want == cpu::CpuIsa::kBaseline ? std::vector<std::string>{"avx", "amx"}
                                         : want == cpu::CpuIsa::kAvx2   ? std::vector<std::string>{"avx512", "amx", "vnni"}
                                                                        : std::vector<std::string>{};
  const std::vector<uint16_t> a(16 * 32, 0x3f80), b(32 * 16, 0x3f80);  // bf16 ones
  std::vector<float> c(16 * 16);
  try {
    mm.bf16(16, 16, 32, a.data(), b.data(), 16, false, c.data(), 16, 0.0f);
  } catch (const Error& e) {
    EXPECT_LT(want, cpu::CpuIsa::kAvx512) << e.what();
    return;
  }
  const std::string impl = mm.last_impl();
  for (const std::string& name : above)
    EXPECT_EQ(impl.find(name), std::string::npos)
        << "oneDNN's bf16 matmul ran " << impl << " in a run at " << cpu::cpu_isa_name(want);
  EXPECT_EQ(c[0], 32.0f);
}

class IsaReached : public ::testing::Environment {
 public:
  void TearDown() override {
    const int ran = cpu::highest_kernel_level();
    EXPECT_LE(ran, static_cast<int>(cpu::cpu_isa())) << "a kernel ran above the level cpu_isa() says";
    const char* want_name = std::getenv("FTX_TEST_ISA");
    if (!want_name || !*want_name) return;
    cpu::CpuIsa want = cpu::CpuIsa::kBaseline;
    bool known = false;
    for (cpu::CpuIsa isa : {cpu::CpuIsa::kBaseline, cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512})
      if (std::string(want_name) == cpu::cpu_isa_name(isa)) want = isa, known = true;
    ASSERT_TRUE(known) << "FTX_TEST_ISA=" << want_name;
    EXPECT_EQ(cpu::cpu_isa(), want) << "cpu_isa() in a run at " << want_name;
    if (ran >= 0)  // none where the tests run only code that has no levels (the RMSNorm)
      EXPECT_EQ(ran, static_cast<int>(want))
          << "ftx's kernels ran at " << cpu::cpu_isa_name(static_cast<cpu::CpuIsa>(ran)) << " in a run at " << want_name;
    check_openblas(want);
    check_onednn(want);
  }
};

::testing::Environment* const kIsaReached = ::testing::AddGlobalTestEnvironment(new IsaReached);

}  // namespace
}  // namespace ftx
