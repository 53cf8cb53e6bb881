// The widening GEMM kernels (widening_kernels.h) compiled for AVX2 + FMA + F16C.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "lib/cpu/cpu_features.h"
#include "lib/cpu/narrow_type.h"
#include "lib/cpu/row_prefetch.h"
#include "lib/cpu/simd_vec.h"
#include "lib/cpu/widening_levels.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace ftx::cpu::avx2 {

namespace {
using simd::Avx2;
#define FTX_WIDENING_KERNELS_LEVEL
#include "lib/cpu/widening_kernels.h"
#undef FTX_WIDENING_KERNELS_LEVEL
}  // namespace

void widening_block(NarrowType type, int64_t M, int64_t K, const float* A, const void* B, int64_t ldb, bool trans,
                    int64_t nn, float* acc, float* chunk) {
  note_kernel_level(CpuIsa::kAvx2);
  with_narrow(type, [&](auto e) {
    using E = decltype(e);
    if (M > Shapes<Avx2>::kMaxStreamRows && !trans) return tile_block<Avx2, E>(M, K, A, B, ldb, nn, acc, chunk);
    if (trans && M >= Shapes<Avx2>::kTransTileMinRows) return trans_tile_block<Avx2, E>(M, K, A, B, ldb, nn, acc, chunk);
    stream_block<Avx2, E>(M, K, A, B, ldb, trans, nn, acc);
  });
}

int64_t widening_scratch_floats(int64_t M, int64_t K) {
  return std::max(tile_chunk_floats<Avx2>(K), trans_scratch_floats<Avx2>(M));
}

}  // namespace ftx::cpu::avx2

#pragma GCC pop_options
#endif
