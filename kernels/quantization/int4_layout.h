#pragma once
// The CUDA backend's device layout of an INT4 weight-only matrix (lib/ops/int4_matrix.h), made on the
// host at upload, and int4_gemm_twin: the CPU twin of int4_gemm.cu's kernel, the same operations in
// the same order on the same layout, which the gpu tests hold the kernel to bit for bit and the CPU
// tests hold to the float64 reference (dequantize_int4).
//
// Layout: still 4 bits a value, as the host's packing (two per byte along N, low nibble first), with
//  * columns padded to a multiple of kInt4ColumnAlign (each thread reads one aligned 32-bit word of
//    8 columns a row); padding values 0, scales 0, zero points 8, so padded columns contribute 0;
//  * act-order (a group_index): rows sorted by group, stably, so each group is one run of rows and a
//    thread reloads its scales once per group, not per row; `perm` says which row of A each stored
//    row multiplies and `row_group` its group. Without a group index rows stay in place and the group
//    of row k is k / group_size (no per-row arrays).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/quantization/int4_gemm.h"
#include "lib/ops/int4_matrix.h"

namespace ftx::cuda {

struct Int4DeviceLayout {
  int64_t rows = 0, cols = 0, cols_padded = 0, groups = 0;
  int64_t group_size = 0;          // rows per group; 0 with act-order (row_group says)
  std::vector<uint8_t> packed;     // rows · cols_padded / 2
  std::vector<float> scales;       // groups · cols_padded
  std::vector<uint8_t> zeros;      // groups · cols_padded, or empty: symmetric
  std::vector<int32_t> row_group;  // rows, or empty
  std::vector<int32_t> perm;       // rows, or empty
};

// `m` (checked with check_int4 under `origin`) in the device layout.
Int4DeviceLayout make_int4_layout(const ops::Int4Matrix& m, const std::string& origin);

// What the kernel computes for C[M, cols] (fp32) = a[M, rows] · W + beta · C, with `a` already
// rounded to the GEMM's input dtype (the kernel rounds as it stages A) and in A's own row order.
void int4_gemm_twin(const Int4DeviceLayout& l, int64_t M, const float* a, float* c, float beta);

}  // namespace ftx::cuda
