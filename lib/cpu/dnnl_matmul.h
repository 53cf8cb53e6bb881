#pragma once
// bf16 GEMMs through oneDNN's matmul primitive: C[M, N] (fp32, row stride ldc) = A[M, K] (bf16) ·
// B (bf16, [K, N] with row stride ldb, or [N, K] with row stride ldb when trans_b) + beta·C. oneDNN picks the CPU's bf16 instructions
// (AVX512-BF16 dot products, AMX tiles where present) and sums in fp32. Primitives are built once
// per weight shape (M is a runtime dimension) and kept. Not thread-safe: one backend, one caller.
#include <cstdint>
#include <memory>

namespace ftx::cpu {

class DnnlMatmul {
 public:
  DnnlMatmul();
  ~DnnlMatmul();
  DnnlMatmul(const DnnlMatmul&) = delete;
  DnnlMatmul& operator=(const DnnlMatmul&) = delete;

  void bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, const uint16_t* B, int64_t ldb, bool trans_b, float* C,
            int64_t ldc, float beta);

  // oneDNN's name for the implementation that ran last (e.g. "brg:avx512_core_bf16"); "" before any.
  const char* last_impl() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ftx::cpu
