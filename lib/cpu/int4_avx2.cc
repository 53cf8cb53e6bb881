// The INT4 GEMM kernels (int4_kernels.h) compiled for AVX2 + FMA.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lib/cpu/cpu_features.h"
#include "lib/cpu/int4_gemm.h"
#include "lib/cpu/simd_vec.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace ftx::cpu::avx2 {

namespace {
using simd::Avx2;
#define FTX_INT4_KERNELS_LEVEL
#include "lib/cpu/int4_kernels.h"
#undef FTX_INT4_KERNELS_LEVEL
}  // namespace

void int4_panel(const Int4Panel& p, const Int4Activations& a, float* acc) {
  note_kernel_level(CpuIsa::kAvx2);
  int4_panel_t<Avx2>(p, a, acc);
}

}  // namespace ftx::cpu::avx2

#pragma GCC pop_options
#endif
