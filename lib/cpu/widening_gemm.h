#pragma once
// GEMMs on the CPU whose weight operand is held narrower than fp32 (int8, fp16, bf16, FP8) while
// the activations and sums stay fp32: the kernels widen the weights to fp32 as they read them, so
// a decode step reads 1 or 2 bytes per weight instead of 4. Shared by weight-only INT8
// (int8_gemm.h), FP8, the fp16/bf16 weights of `--dtype fp16|bf16 --device cpu`, and fp32 weights.
//
// Few rows (decode) run as a streaming kernel that reads each weight once for all rows; many rows
// (prefill) as register tiles over strips of the weights widened to fp32 inside the GEMM, strip by
// strip. Both are written once (widening_kernels.h) for every weight type and both vector levels,
// AVX-512 and AVX2 (cpu_features.h), with the same sums; below AVX2, portable loops. A weight type
// is a NarrowType and its Narrow<> widening rule (narrow_type.h).
#include <cstddef>
#include <cstdint>

namespace ftx::cpu {

// kFp32 is no narrowing at all: fp32 weights take the same streaming kernel, because for a few
// rows OpenBLAS's sgemm spends more time packing the weights on every call than multiplying (half
// of a 16-row decode step by perf), and on packed panels one row streams faster than sgemv reads
// row-major weights (bench_decode_gemm, medium layers: 0.87x of sgemv's time).
// kFp8E4M3: FP8 weights (--fp8), widened exactly; the caller quantises A (lib/ops/op_types.h).
enum class NarrowType { kInt8, kFp16, kBf16, kFp32, kFp8E4M3 };

// Up to this many rows of A the streaming kernel runs at the AVX-512 level, up to 8 at AVX2; more
// take the tile kernel ([K, N] weights; a transposed B stays on the streaming kernel). The level's
// bound is Shapes<V>::kMaxStreamRows (widening_kernels.h). Each row's sums are the same whatever the number
// of rows (the k order never changes, in the streaming and the tile kernel alike, at every level),
// so a request's logits do not depend on how many others share its decode step or its prefill
// (for fp32 weights held row-major, from two rows up: one row of a row-major [K, N] goes to
// OpenBLAS's sgemv; the engine's layer matrices are packed, and its lm_head is a transposed
// [N, K], which takes the streaming kernel).
constexpr int64_t kWideningStreamRows = 16;
// The widest column panel of packed weights (ops::Weight::panel_cols) and the kernels' column chunk.
constexpr int64_t kWideningPanelCols = 256;

// The panel width for a [K, N] layer matrix that `threads` threads share by whole panels: the
// widest of 256, 192, 128 and 64 columns that gives every thread as many panels, else 256. A
// decode step's threads each read their own panels, so an odd share is time lost on the whole
// step: GPT-2 124M's [768, 2304] and [768, 768] are 9 and 3 panels of 256, which two threads
// split 5:4 and 2:1; in 192 columns they are 12 and 4 (bench_decode_gemm, 124M layers, one row:
// 0.82x of the time in fp32 and 0.72x in bf16). The sums do not depend on the width.
int64_t balanced_panel_cols(int64_t N, int threads);

// Rearranges a row-major [K, N] matrix of `elem_size`-byte elements in place into column panels of
// `panel_cols` (<= kWideningPanelCols) columns: panel p (columns [p·W, min(N, (p+1)·W))) is a
// row-major [K, width] block at element offset p·W·K.
void pack_column_panels(void* data, size_t elem_size, int64_t K, int64_t N, int64_t panel_cols);

// Output columns [n0, n0 + nn) of C[M, N] = A[M, K] · B · diag(scale) + beta·C on the calling
// thread. B holds `type` elements, [K, N] row-major, or [N, K] with trans_b (embedding tables
// used as lm_head), or [K, N] in column panels of `panel_cols` columns when that is not 0
// (pack_column_panels; not with trans_b). scale: one per column of C, or null for none. A is used
// as given: rounding it to B's precision, when the contract asks for it, is the caller's.
void widening_gemm_block(NarrowType type, int64_t M, int64_t N, int64_t K, const float* A, const void* B,
                         bool trans_b, int64_t panel_cols, const float* scale, float* C, float beta, int64_t n0,
                         int64_t nn);

// Where column `col` of a [K, N] matrix of `elem_size`-byte elements starts and the stride between
// its rows, in elements: row-major (panel_cols 0), or packed in column panels of panel_cols.
struct ColumnSegment {
  const void* start;
  int64_t ld;
  int64_t width;  // columns from `col` to the end of its panel (or of the matrix)
};
ColumnSegment column_segment(const void* B, size_t elem_size, int64_t K, int64_t N, int64_t panel_cols, int64_t col);

}  // namespace ftx::cpu
