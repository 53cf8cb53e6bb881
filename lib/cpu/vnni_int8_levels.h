#pragma once
// The W8A8 int8 product's panel kernels at the AVX2 level (vnni_int8_avx2.cc): all rows of a over
// columns [j0, j0 + cols) of one panel (ldw bytes per group of 4 rows), acc row stride ldacc.
// Each returns the columns it did, a multiple of 8 from j0; vnni_int8_gemm.cc does the rest.
#include <cstdint>

#include "lib/cpu/vnni_int8_gemm.h"

namespace ftx::cpu {
namespace avx2 {
int64_t int8_panel_product(const VnniActivations& a, const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols,
                           int32_t* acc, int64_t ldacc);
}
namespace avx_vnni {
int64_t int8_panel_product(const VnniActivations& a, const uint8_t* w, int64_t ldw, int64_t j0, int64_t cols,
                           int32_t* acc, int64_t ldacc);
}
}  // namespace ftx::cpu
