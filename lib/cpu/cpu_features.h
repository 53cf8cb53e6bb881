#pragma once
// What the CPU this process runs on can execute, asked once, as an instruction-set level and the
// extensions beside it. The hand-written kernels are compiled for each level with target
// attributes and pick their path at run time, so one binary serves every x86-64 machine.
//
// FTX_CPU_ISA=baseline|avx2|avx512 caps the level (as CTranslate2's CT2_FORCE_CPU_ISA and oneDNN's
// ONEDNN_MAX_CPU_ISA do; oneDNN is capped with it), so that an AVX-512 machine runs and tests the
// AVX2 and baseline paths too, with the extensions of the levels above it off (AVX-VNNI too, which
// CPUs of the AVX2 generation lack). A cap above what the CPU has leaves the CPU's own level. OpenBLAS
// chooses its kernels when it loads, before any of this runs: cap it with OPENBLAS_CORETYPE
// (Haswell for avx2, Prescott for baseline), as the tests do. Off x86-64 the level is baseline.
#include <atomic>
#include <string>

namespace ftx::cpu {

// Ordered: each level includes the ones below it.
//   kBaseline: any x86-64 (SSE2); the portable C++ kernels.
//   kAvx2:     AVX2 + FMA + F16C (x86-64-v3's vector part: Haswell, Zen 1 and later).
//   kAvx512:   AVX-512 F + BW + VL + DQ on top of kAvx2 (Skylake-X, Zen 4 and later).
enum class CpuIsa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The CPU's own level, whatever the cap.
CpuIsa detected_cpu_isa();
// The level the kernels run at: detected_cpu_isa() capped by FTX_CPU_ISA. Throws ftx::Error
// naming the variable and its value when FTX_CPU_ISA holds anything but a level's name (the CPU
// backend asks at construction, so the error surfaces before any kernel runs).
CpuIsa cpu_isa();
const char* cpu_isa_name(CpuIsa isa);
// One line for `ftx --version` and benchmark headers: the level that runs, the extensions the
// kernels use at it, and the cap when one lowers it (e.g. "avx2 (avx-vnni; capped by
// FTX_CPU_ISA=avx2, the CPU has avx512)").
std::string cpu_isa_summary();

// Extensions, each false below the level it belongs to (so the cap turns them off too).
bool has_avx2();         // cpu_isa() >= kAvx2
bool has_avx_vnni();     // kAvx2 and AVX-VNNI (vpdpbusd on 256 bits: Alder Lake, Sapphire Rapids, Zen 5), uncapped
bool has_avx512f();      // cpu_isa() >= kAvx512
bool has_avx512_core();  // kAvx512 (F + BW + VL): the byte/word and 256-bit masked forms the kernels use
bool has_avx512_vnni();  // kAvx512 and VNNI (vpdpbusd on 512 bits)
bool has_avx512_bf16();  // kAvx512 and BF16 (vdpbf16ps)
bool has_amx_bf16();     // kAvx512 and AMX tiles with bf16 (oneDNN uses them; ftx's kernels do not)

// The rule behind all of the above, as a function of what a CPU has, so that it can be tested for
// CPUs other than this one (an Alder Lake's AVX-VNNI, a Sapphire Rapids capped at avx2).
struct CpuFeatures {  // CPUID's answers that matter to the kernels
  bool avx2 = false, fma = false, f16c = false, avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, amx_bf16 = false;
};
struct KernelFeatures {  // what the kernels use: a level and the extensions on at it
  CpuIsa isa = CpuIsa::kBaseline;
  bool avx_vnni = false, avx512_vnni = false, avx512_bf16 = false, amx_bf16 = false;
};
CpuIsa isa_of(const CpuFeatures& cpu);
// On `cpu` capped at `cap` (kAvx512: no cap).
KernelFeatures kernel_features(const CpuFeatures& cpu, CpuIsa cap);
// This process's: the CPU's features under FTX_CPU_ISA (throws as cpu_isa() does).
const KernelFeatures& kernel_features();

// Each kernel dispatch notes the level of the path it takes. The highest noted so far in this
// process, -1 before any: the tests check that a cap (or an emulated CPU) reached every kernel,
// which a dispatch on the CPU alone would not (tests/unit/cpu_isa_reached.cc).
namespace detail {
extern std::atomic<int> highest_kernel_level;
void raise_kernel_level(int level);
}  // namespace detail
inline void note_kernel_level(CpuIsa isa) {  // a relaxed load on every dispatch, a store once per level
  if (detail::highest_kernel_level.load(std::memory_order_relaxed) < static_cast<int>(isa))
    detail::raise_kernel_level(static_cast<int>(isa));
}
inline int highest_kernel_level() { return detail::highest_kernel_level.load(std::memory_order_relaxed); }

}  // namespace ftx::cpu
