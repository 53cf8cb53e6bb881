#pragma once
// The widening GEMM's kernels at each vector level (widening_kernels.h, compiled once per level in
// widening_avx512.cc and widening_avx2.cc); widening_gemm.cc picks the level and falls back to
// portable code below AVX2.
#include <cstdint>

#include "lib/cpu/widening_gemm.h"

namespace ftx::cpu {

// acc[m][j] = Σ_k A[m][k] · B(k, j) for M rows (any number) and nn columns (acc zeroed by the
// caller, row stride nn). B points at column 0 of the block: [K, nn] with row stride ldb, or with
// trans the block's first row of an [N, K] matrix. chunk: scratch of widening_scratch_floats(M, K)
// floats for the many-row kernels (tile_block, trans_tile_block).
namespace avx512 {
void widening_block(NarrowType type, int64_t M, int64_t K, const float* A, const void* B, int64_t ldb, bool trans,
                    int64_t nn, float* acc, float* chunk);
int64_t widening_scratch_floats(int64_t M, int64_t K);
}  // namespace avx512

namespace avx2 {
void widening_block(NarrowType type, int64_t M, int64_t K, const float* A, const void* B, int64_t ldb, bool trans,
                    int64_t nn, float* acc, float* chunk);
int64_t widening_scratch_floats(int64_t M, int64_t K);
}  // namespace avx2

}  // namespace ftx::cpu
