#pragma once
// INT4 weight-only GEMM on the CPU (lib/ops/int4_matrix.h's arithmetic): C = A' · W + beta·C with
// W[k][n] = (u - z)·s in groups along K, A' = A rounded to the model's float type, sums in fp32.
//
// The 4-bit values stay 4-bit in memory: a decode step reads K·N/2 bytes and the scales. The layout
// (Int4Layout, made once at upload):
//  * rows reordered so that every group is one contiguous run (act-order matrices: GPTQ's g_idx), and
//    each run padded with zero rows to a multiple of 8 ("kernel rows", K' in all);
//  * the values of 8 consecutive kernel rows of one column packed into a 32-bit word, row t of the
//    eight at bits 4t..4t+3, so that a vector of words holds 8 rows of lanes-many columns;
//  * those words in column panels of kInt4PanelCols columns: panel p is a row-major [K'/8, width]
//    block of words, so a panel is one sequential stream.
// Each GEMM gathers A's columns in kernel-row order (A'' below), zero for the padding rows.
//
// The arithmetic, the same at every level for any number of rows (each row's bits do not depend on
// M): for each output and each group g in order,
//     t   = Σ_{k in g} A'[k] · u[k]           one fused multiply-add chain over the group's kernel rows
//     t'  = t - z_g · Σ_{k in g} A'[k]         one fused multiply-add; the sum of A' is fp32, in k order
//     acc = acc + t' · s_g                     one fused multiply-add, acc from 0
// then C = acc + beta·C. The kernels read nibble t of a word as u·16^t (one and; t = 7: one shift)
// and multiply it by A'·16^-t, prepared with the gather (exact, so the product is A'·u's; only an
// |A'| below 2^-102, whose A'·16^-t is subnormal, loses bits there); at the baseline level, without
// FMA, each multiply-add is a product and a sum.
#include <cstdint>
#include <vector>

#include "formats/dtype.h"
#include "lib/cpu/cpu_features.h"
#include "lib/ops/int4_matrix.h"

namespace ftx::cpu {

constexpr int64_t kInt4PanelCols = 64;

// The CPU backend's form of an INT4 matrix (ops::Weight::int4_aux; `words` is ops::Weight::data).
struct Int4Layout {
  int64_t K = 0, N = 0;
  int64_t kernel_rows = 0;            // K': a multiple of 8
  std::vector<int32_t> row_source;    // per kernel row: the matrix row it holds, -1 for padding
  // The groups that have rows, in kernel-row order: rows [group_start[i], group_start[i + 1]) are
  // group group_id[i] of the matrix (its scales and zeros row).
  std::vector<int64_t> group_start;
  std::vector<int32_t> group_id;
  std::vector<float> scales;          // [groups, N]
  std::vector<uint8_t> zeros;         // [groups, N], or empty: symmetric (8)
  const uint32_t* words = nullptr;    // kernel_rows / 8 · N words, in column panels
  int64_t kernel_groups() const { return static_cast<int64_t>(group_id.size()); }
};

// Words needed for m's layout (the caller allocates them), and the layout filled into `words`.
// Throws Error (check_int4) for a malformed matrix.
int64_t int4_layout_words(const ops::Int4Matrix& m);
Int4Layout make_int4_layout(const ops::Int4Matrix& m, uint32_t* words);

// One GEMM's A, prepared for the kernels: A'' [M, K'] (A rounded to input_dtype, gathered in kernel-row
// order, nibble t's factor 16^-t folded in) and the group sums of A' [M, kernel groups].
struct Int4Activations {
  int64_t M = 0, K = 0;  // K: kernel rows
  std::vector<float> a;
  std::vector<float> group_sums;
  void prepare(int64_t M, int64_t K, const float* A, const Int4Layout& w, DType input_dtype);
};

// Output columns [n0, n0 + nn) of C[M, N] (n0 a multiple of kInt4PanelCols) on the calling thread,
// at the level cpu_isa() runs, or at `isa` (the tests run each level the CPU has in one process).
void int4_gemm_block(const Int4Layout& w, const Int4Activations& a, float* C, float beta, int64_t n0, int64_t nn);
void int4_gemm_block(CpuIsa isa, const Int4Layout& w, const Int4Activations& a, float* C, float beta, int64_t n0,
                     int64_t nn);

// The kernels of one level over one panel: acc[M, width] (row stride kInt4PanelCols, zeroed by the
// caller) += the group terms for columns [col, col + width) of one panel's words.
struct Int4Panel {
  const Int4Layout* w;
  const uint32_t* words;  // the panel's first word
  int64_t col, width;
};
namespace avx512 {
void int4_panel(const Int4Panel& p, const Int4Activations& a, float* acc);
}
namespace avx2 {
void int4_panel(const Int4Panel& p, const Int4Activations& a, float* acc);
}

}  // namespace ftx::cpu
