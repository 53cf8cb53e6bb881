#include "lib/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

#include "formats/error.h"

namespace ftx::cpu {

namespace {

// The only place ftx asks the CPU (tests/unit/cpu_isa_test.cc holds the sources to that): every
// kernel dispatches on what kernel_features() makes of this under FTX_CPU_ISA.
CpuFeatures detect_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx_vnni = __builtin_cpu_supports("avxvnni");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
#endif
  return f;
}

const CpuFeatures& detected_features() {
  static const CpuFeatures f = detect_features();
  return f;
}

// The cap FTX_CPU_ISA asks for; kAvx512 (no cap) when unset or empty.
CpuIsa requested_cap() {
  const char* env = std::getenv("FTX_CPU_ISA");
  if (!env || !*env) return CpuIsa::kAvx512;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (!std::strcmp(env, cpu_isa_name(isa))) return isa;
  throw Error(std::string("FTX_CPU_ISA=") + env + ": expected baseline, avx2 or avx512");
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "baseline";
}

CpuIsa isa_of(const CpuFeatures& cpu) {
  if (!(cpu.avx2 && cpu.fma && cpu.f16c)) return CpuIsa::kBaseline;
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq) return CpuIsa::kAvx512;
  return CpuIsa::kAvx2;
}

KernelFeatures kernel_features(const CpuFeatures& cpu, CpuIsa cap) {
  const CpuIsa own = isa_of(cpu);
  KernelFeatures k;
  k.isa = cap < own ? cap : own;
  // Capped at avx2, the CPU runs as one without AVX-512 of its generation would not: an AVX2
  // machine such as AMD's Zen 3 has no AVX-VNNI either, so a cap turns it off too.
  k.avx_vnni = k.isa >= CpuIsa::kAvx2 && k.isa == own && cpu.avx_vnni;
  const bool avx512 = k.isa == CpuIsa::kAvx512;
  k.avx512_vnni = avx512 && cpu.avx512_vnni;
  k.avx512_bf16 = avx512 && cpu.avx512_bf16;
  k.amx_bf16 = avx512 && cpu.amx_bf16;
  return k;
}

CpuIsa detected_cpu_isa() { return isa_of(detected_features()); }

const KernelFeatures& kernel_features() {
  // A static initialised by a throwing call stays uninitialised: a bad value throws every time.
  static const KernelFeatures k = kernel_features(detected_features(), requested_cap());
  return k;
}

CpuIsa cpu_isa() { return kernel_features().isa; }

bool has_avx2() { return cpu_isa() >= CpuIsa::kAvx2; }
bool has_avx_vnni() { return kernel_features().avx_vnni; }
bool has_avx512f() { return cpu_isa() >= CpuIsa::kAvx512; }
bool has_avx512_core() { return has_avx512f(); }
bool has_avx512_vnni() { return kernel_features().avx512_vnni; }
bool has_avx512_bf16() { return kernel_features().avx512_bf16; }
bool has_amx_bf16() { return kernel_features().amx_bf16; }

namespace detail {
std::atomic<int> highest_kernel_level{-1};
void raise_kernel_level(int level) {
  int seen = highest_kernel_level.load(std::memory_order_relaxed);
  while (seen < level && !highest_kernel_level.compare_exchange_weak(seen, level, std::memory_order_relaxed)) {
  }
}
}  // namespace detail

std::string cpu_isa_summary() {
  std::string s = cpu_isa_name(cpu_isa());
  std::string ext;
  auto add = [&](bool on, const char* name) {
    if (on) ext += (ext.empty() ? "" : ", ") + std::string(name);
  };
  add(has_avx_vnni() && !has_avx512f(), "avx-vnni");
  add(has_avx512_vnni(), "vnni");
  add(has_avx512_bf16(), "bf16");
  add(has_amx_bf16(), "amx");
  std::string cap;
  if (cpu_isa() != detected_cpu_isa())
    cap = std::string("capped by FTX_CPU_ISA=") + std::getenv("FTX_CPU_ISA") + ", the CPU has " +
          cpu_isa_name(detected_cpu_isa());
  if (!ext.empty() || !cap.empty()) s += " (" + ext + (!ext.empty() && !cap.empty() ? "; " : "") + cap + ")";
  return s;
}

}  // namespace ftx::cpu
