// The INT4 GEMM kernels (int4_kernels.h) compiled for AVX-512 (F + BW + VL + DQ). VNNI does not
// apply: A stays a float (the contract multiplies A rounded to the model's float type by u - z in
// fp32), so the product is fp32 FMAs on 16 lanes, and the unpacking is one and and one conversion
// per 16 weights.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lib/cpu/cpu_features.h"
#include "lib/cpu/int4_gemm.h"
#include "lib/cpu/simd_vec.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace ftx::cpu::avx512 {

namespace {
using simd::Avx512;
#define FTX_INT4_KERNELS_LEVEL
#include "lib/cpu/int4_kernels.h"
#undef FTX_INT4_KERNELS_LEVEL
}  // namespace

void int4_panel(const Int4Panel& p, const Int4Activations& a, float* acc) {
  note_kernel_level(CpuIsa::kAvx512);
  int4_panel_t<Avx512>(p, a, acc);
}

}  // namespace ftx::cpu::avx512

#pragma GCC pop_options
#endif
