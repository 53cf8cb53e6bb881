#pragma once
// The int8 × int8 → int32 product of the CPU's W8A8 GEMM on weights packed once at load time for
// AVX512-VNNI's vpdpbusd, which multiplies 4 unsigned bytes by 4 signed bytes and adds the four
// products into an int32 lane. Written by hand because oneDNN 2.6's s8×s8 matmul on a weight in
// its plain layout, with the row count left to run time (every decode and prefill length),
// repacks the weight and recomputes its s8 compensation on every call: a decode step read the
// weights about three times over (29 ms per step for GPT-2-medium at batch 1, 2.6x the memory
// floor, against 13.6 ms for the weight-only int8 kernel reading the same bytes).
//
// Layout: column panels of kWideningPanelCols (as the other narrow weights, widening_gemm.h).
// Within a panel of width W, group g holds rows 4g..4g+3 as W lanes of 4 bytes, lane j being
// column j's four weights: one 64-byte load is 16 columns × 4 rows, one vpdpbusd operand. K is
// padded to a multiple of 4 with zero weights. Bytes are stored as w + 128 (unsigned), so the
// activations are the signed operand and the offset is removed exactly afterwards:
//   Σ_k (w + 128)·a = Σ_k w·a + 128·Σ_k a.
// The same layout serves the AVX2 level (vnni_int8_levels.h): a 32-byte load is 8 columns × 4 rows,
// multiplied by AVX-VNNI's 256-bit vpdpbusd where the CPU has it, else by an exact emulation.
#include <cstddef>
#include <cstdint>

#include "lib/cpu/cpu_features.h"

namespace ftx::cpu {

inline int64_t vnni_padded_k(int64_t K) { return (K + 3) / 4 * 4; }
inline size_t vnni_packed_bytes(int64_t K, int64_t N) {
  return static_cast<size_t>(vnni_padded_k(K)) * static_cast<size_t>(N);
}

// q[K, N] row-major int8 → out[vnni_packed_bytes(K, N)] in the layout above.
void pack_int8_vnni(const int8_t* q, int64_t K, int64_t N, uint8_t* out);

// Quantised activations as the product takes them: rows of vnni_padded_k(K) int8 values (zero
// padded) and each row's sum Σ_k q[m][k].
struct VnniActivations {
  const int8_t* q = nullptr;
  const int32_t* row_sum = nullptr;
  int64_t M = 0, K = 0;
};

// acc[m][j] = Σ_k a.q[m][k] · W[k][n0 + j] for j < nn (acc row stride nn), W packed by
// pack_int8_vnni as a [K, N] matrix; exact in int32.
void vnni_int8_product(const VnniActivations& a, const uint8_t* packed, int64_t N, int64_t n0, int64_t nn,
                       int32_t* acc);
// The kernel vnni_int8_product runs with the kernel features `f` (cpu_features.h): AVX512-VNNI's
// vpdpbusd, AVX-VNNI's (256 bits), its exact emulation at the AVX2 level, or portable code.
enum class Int8ProductKernel { kAvx512Vnni, kAvxVnni, kAvx2Emulated, kPortable };
Int8ProductKernel int8_product_kernel(const KernelFeatures& f);
// The same in portable code: what a CPU below AVX2 runs (declared for the tests, which compare the
// levels against it).
void vnni_int8_product_portable(const VnniActivations& a, const uint8_t* packed, int64_t N, int64_t n0, int64_t nn,
                                int32_t* acc);

}  // namespace ftx::cpu
