#include "lib/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

#include "formats/error.h"

namespace ftx::cpu {

namespace {

#if defined(__x86_64__)
// __builtin_cpu_supports takes a string literal only, hence one line per name.
bool cpu_has(const char* f) {
  __builtin_cpu_init();
  if (!std::strcmp(f, "avx2")) return __builtin_cpu_supports("avx2");
  if (!std::strcmp(f, "fma")) return __builtin_cpu_supports("fma");
  if (!std::strcmp(f, "f16c")) return __builtin_cpu_supports("f16c");
  if (!std::strcmp(f, "avxvnni")) return __builtin_cpu_supports("avxvnni");
  if (!std::strcmp(f, "avx512f")) return __builtin_cpu_supports("avx512f");
  if (!std::strcmp(f, "avx512bw")) return __builtin_cpu_supports("avx512bw");
  if (!std::strcmp(f, "avx512vl")) return __builtin_cpu_supports("avx512vl");
  if (!std::strcmp(f, "avx512dq")) return __builtin_cpu_supports("avx512dq");
  if (!std::strcmp(f, "avx512vnni")) return __builtin_cpu_supports("avx512vnni");
  if (!std::strcmp(f, "avx512bf16")) return __builtin_cpu_supports("avx512bf16");
  if (!std::strcmp(f, "amx-bf16")) return __builtin_cpu_supports("amx-bf16");
  return false;
}
#else
bool cpu_has(const char*) { return false; }
#endif

CpuIsa detect() {
  if (!(cpu_has("avx2") && cpu_has("fma") && cpu_has("f16c"))) return CpuIsa::kBaseline;
  if (cpu_has("avx512f") && cpu_has("avx512bw") && cpu_has("avx512vl") && cpu_has("avx512dq")) return CpuIsa::kAvx512;
  return CpuIsa::kAvx2;
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

CpuIsa detected_cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

CpuIsa cpu_isa() {
  // A static initialised by a throwing call stays uninitialised: a bad value throws every time.
  static const CpuIsa isa = [] {
    const CpuIsa cap = requested_cap(), cpu = detected_cpu_isa();
    return cap < cpu ? cap : cpu;
  }();
  return isa;
}

bool has_avx2() { return cpu_isa() >= CpuIsa::kAvx2; }
bool has_avx_vnni() {
  // Capped at avx2, the CPU runs as one without AVX-512 of its generation would not: an AVX2
  // machine such as AMD's Zen 3 has no AVX-VNNI either, so a cap turns it off too.
  static const bool yes = cpu_has("avxvnni");
  return has_avx2() && yes && cpu_isa() == detected_cpu_isa();
}
bool has_avx512f() { return cpu_isa() >= CpuIsa::kAvx512; }
bool has_avx512_core() { return has_avx512f(); }
bool has_avx512_vnni() {
  static const bool yes = cpu_has("avx512vnni");
  return has_avx512f() && yes;
}
bool has_avx512_bf16() {
  static const bool yes = cpu_has("avx512bf16");
  return has_avx512f() && yes;
}
bool has_amx_bf16() {
  static const bool yes = cpu_has("amx-bf16");
  return has_avx512f() && yes;
}

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
