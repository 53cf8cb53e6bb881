#pragma once
// bf16 GEMMs of more than eight rows (prefill, batched decode) on AVX512-BF16's vdpbf16ps, over
// the bf16 (or int8) weights where the CPU backend keeps them ([K, N] row-major or in column panels,
// widening_gemm.h).
//
// vdpbf16ps takes 16 lanes of bf16 pairs (k, k+1) from each operand and adds both exact products
// to each lane's fp32 sum: twice the multiply-adds of an fp32 FMA per instruction. The weights are
// stored one k per row, so a strip of 64 columns is interleaved into pairs inside the GEMM, once,
// into a buffer that stays in L2 while every 6-row block of A passes over it (as the fp32 tile
// kernel widens its strips). Written by hand because oneDNN 2.6's bf16 matmul, with the row count
// left to run time, took the jit gemm path that packs every weight block on every call and, given
// a 256-column panel at a time, ran a 124M model's layer at 69% of what this instruction allows at
// 64 rows (81% at 512).
//
// Sums: lane j of row m is Σ over k pairs of a[m][2p]·b[2p][j] + a[m][2p+1]·b[2p+1][j], each
// product exact (bf16 × bf16 fits an fp32), each addition rounded in fp32; bf16 denormals read as
// zero (what the instruction does). The order of k never depends on M, so a row's sums do not
// depend on how many rows share the GEMM.
#include <cstdint>

namespace ftx::cpu {

// Whether this CPU runs the kernel, for a K it takes (K even: the pairs never straddle a row end).
bool bf16_pair_gemm_supported(int64_t K);
// Supported, and the CPU has no AMX tiles (where oneDNN's matmul does 16 times the work per
// instruction and stays the better choice).
bool bf16_pair_gemm_preferred(int64_t K);

// Output columns [n0, n0 + nn) of C[M, N] = A · B + beta·C on the calling thread. A: [M, K] bf16,
// row-major. B: [K, N] bf16, row-major (panel_cols 0), or in column panels of panel_cols columns.
void bf16_pair_gemm_block(int64_t M, int64_t N, int64_t K, const uint16_t* A, const uint16_t* B, int64_t panel_cols, float* C,
                          float beta, int64_t n0, int64_t nn);

// Weight-only INT8 in a bf16 model, many rows: the same over int8 weights q[K, N] (row-major or in
// column panels), C = (A · q) · diag(scale) + beta·C. Every int8 value is exact in bf16, so the
// strip is paired without rounding and the products are exact; each column's sum is multiplied by
// its scale in fp32 before beta·C is added, as the int8 widening kernel does.
void int8_bf16_pair_gemm_block(int64_t M, int64_t N, int64_t K, const uint16_t* A, const int8_t* B, const float* scale,
                               int64_t panel_cols, float* C, float beta, int64_t n0, int64_t nn);

}  // namespace ftx::cpu
