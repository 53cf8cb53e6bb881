#pragma once
// INT4 weight-only GEMM (the arithmetic of lib/ops/int4_matrix.h) on the CUDA device: one tiled
// kernel for every M, decode and prefill alike, so a row's result never depends on how many rows
// share the call (docs/cuda.md, "INT4 weight-only"). The device layout is int4_layout.h's; the
// kernel's exact order of operations is int4_gemm_twin there, its CPU twin.
//
// Each block owns kInt4ColThreads · 8 output columns and kInt4TileM rows of A at a time; its
// kInt4Slices slices of kInt4ColThreads threads split K: a thread holds 8 columns (one 32-bit word
// of packed nibbles per row) and, for every row k of its slice, forms w = (u - z) · s in fp32 once
// and multiplies it into all kInt4TileM rows (A' staged in shared memory, rounded to input_dtype),
// so each packed weight is read once per kInt4TileM rows of A: once per decode step up to 8 rows.
// Rows of K go to the slices in steps of kInt4StepRows: slice s takes rows
// [t·kInt4StepRows + s·kInt4SliceRows, + kInt4SliceRows) of step t, summed in order by fma; the
// slices' sums are then added in slice order, and beta·C (when beta != 0) by one fma.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/elem_kind.h"

namespace ftx::cuda {

constexpr int kInt4ColumnAlign = 8;  // columns are padded to this on the device (one 32-bit word a row)
constexpr int kInt4ColThreads = 16;  // threads across columns in a block (8 columns each)
constexpr int kInt4Slices = 16;      // threads across K in a block
constexpr int kInt4SliceRows = 4;    // rows of K a slice takes per step
constexpr int kInt4StepRows = kInt4Slices * kInt4SliceRows;
constexpr int kInt4TileM = 8;  // rows of A per pass over the weights

// The device operands of one INT4 matrix [K, N] (int4_layout.h describes each buffer).
struct Int4DeviceWeight {
  const uint8_t* packed = nullptr;     // [K, n_pad / 2], rows in the layout's order
  const float* scales = nullptr;       // [groups, n_pad]
  const uint8_t* zeros = nullptr;      // [groups, n_pad], or null: symmetric (z = 8)
  const int32_t* row_group = nullptr;  // [K]: the group of each (reordered) row, or null: k / group_size
  const int32_t* perm = nullptr;       // [K]: the row of A each row multiplies, or null: itself
  int64_t group_size = 0;              // rows per group when row_group is null
};

// C[M, N] (c_kind: fp32, fp16 or bf16, rounded once) = A'[M, K] · W + beta · C, A (a_kind) rounded to
// in_kind (fp32, fp16, bf16) first. N even; every pointer from the backend's arena (256-byte
// aligned). Error for a kind activations are never held in.
void invoke_int4_gemm(cudaStream_t stream, void* C, ElemKind c_kind, const void* A, ElemKind a_kind, ElemKind in_kind,
                      const Int4DeviceWeight& w, int64_t M, int64_t N, int64_t K, float beta);

}  // namespace ftx::cuda
