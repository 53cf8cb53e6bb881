#include "lib/cpu/int8_gemm.h"

#include "lib/cpu/widening_gemm.h"

namespace ftx::cpu {

void int8_weight_gemm_block(int64_t M, int64_t N, int64_t K, const float* A, const int8_t* q, const float* scale,
                            float* C, float beta, int64_t n0, int64_t nn, int64_t panel_cols) {
  widening_gemm_block(NarrowType::kInt8, M, N, K, A, q, /*trans_b=*/false, panel_cols, scale, C, beta, n0, nn);
}

}  // namespace ftx::cpu
