#pragma once
// Plain C++ loops compiled once per instruction-set level (cpu_features.h) and picked at run time
// by cpu_isa(), so that FTX_CPU_ISA caps them as it caps the hand-written kernels (GCC's
// target_clones picks when the binary loads, from the CPU alone). The body is an always_inline
// template over a bool that says whether the level fuses multiply-adds (std::fma there; a product
// then a sum below AVX2, which has no FMA): the compiler vectorises it for each level's registers.
//
// FTX_CPU_LEVELS(ret, name, params, args) defines name_avx512, name_avx2 and name_baseline, each
// returning name##_t<fma>args, and `ret name params`, which calls the one for cpu_isa().
#include "lib/cpu/cpu_features.h"

#if defined(__x86_64__)
#define FTX_CPU_LEVELS(ret, name, params, args)                                                            \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))) ret name##_avx512 params { \
    ::ftx::cpu::note_kernel_level(::ftx::cpu::CpuIsa::kAvx512);                                            \
    return name##_t<true> args;                                                                            \
  }                                                                                                        \
  __attribute__((target("avx2,fma,f16c"))) ret name##_avx2 params {                                        \
    ::ftx::cpu::note_kernel_level(::ftx::cpu::CpuIsa::kAvx2);                                              \
    return name##_t<true> args;                                                                            \
  }                                                                                                        \
  ret name##_baseline params {                                                                             \
    ::ftx::cpu::note_kernel_level(::ftx::cpu::CpuIsa::kBaseline);                                          \
    return name##_t<false> args;                                                                           \
  }                                                                                                        \
  ret name params {                                                                                        \
    static const ::ftx::cpu::CpuIsa isa = ::ftx::cpu::cpu_isa();                                          \
    if (isa == ::ftx::cpu::CpuIsa::kAvx512) return name##_avx512 args;                                     \
    if (isa == ::ftx::cpu::CpuIsa::kAvx2) return name##_avx2 args;                                         \
    return name##_baseline args;                                                                           \
  }
#else
#define FTX_CPU_LEVELS(ret, name, params, args) \
  ret name params { return name##_t<false> args; }
#endif

namespace ftx::cpu {

// a·b + c: fused where the level has FMA, else rounded twice (the same at every call of a level).
template <bool kFma>
__attribute__((always_inline)) inline float mul_add(float a, float b, float c) {
  if constexpr (kFma) return __builtin_fmaf(a, b, c);
  else return a * b + c;
}

}  // namespace ftx::cpu
