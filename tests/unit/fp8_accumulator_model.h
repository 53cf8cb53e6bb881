#pragma once
// What Hopper's FP8 tensor cores do to a sum, for the CUDA FP8 tests (cuda_fp8_test.cc).
//
// The products of two E4M3 values are exact (4 × 4 significant bits), but the tensor core adds them
// in an accumulator of about 14 significant bits, not fp32's 24 (measured on H800 for DeepSeek-V3,
// arXiv:2412.19437 §3.3.2). With CUBLASLT_MATMUL_DESC_FAST_ACCUM off, as ftx runs it
// (kernels/quantization/fp8_gemm_lt.cc), the partial sum is moved into fp32 registers after every
// few tensor-core instructions: assumed here at most every 128 values of k (4 instructions of
// k = 32, CUTLASS's default FP8 promotion interval; cuBLASLt's own is not documented). Two
// consequences, each with a helper below:
//  * a bound: inside a block of n ≤ 128 products each addition may lose up to 2^-13 of its result
//    (14 bits, truncated), so the block's error is at most γ·Σ|p| with γ = (n-1)·2^-13 /
//    (1 - (n-1)·2^-13) (recursive summation, Higham §4.2); the fp32 sum of the blocks adds
//    fp32's γ over the block count, and the CPU twin's own fp32 sum of all K products fp32's γ
//    over K. fp8_gemm_bound() gives the difference of the two per output.
//  * an emulation: a CPU backend whose FP8 GEMMs sum each block of `block` products in `bits`
//    significant bits (truncated or rounded to nearest) and the blocks in fp32, so a test can see
//    how far such an accumulator moves a whole engine's logits from fp32 accumulation.
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "lib/cpu/cpu_backend.h"
#include "lib/quant/fp8.h"

namespace ftx::test {

constexpr int kFp8AccumulatorBits = 14;
constexpr int64_t kFp8PromotionInterval = 128;

// Per-output bound of |GPU - CPU| for an FP8 GEMM of the same E4M3 operands, the GPU's sums as
// above, the CPU's in fp32: `abs_products` is Σ_k |q_a·q_w| (in E4M3 units), `scale` = s_x·s_w.
inline double fp8_gemm_bound(double abs_products, int64_t K, double scale) {
  const double n = static_cast<double>(std::min(K, kFp8PromotionInterval));
  const double u = std::ldexp(1.0, 1 - kFp8AccumulatorBits);
  const double blocks = std::ceil(static_cast<double>(K) / kFp8PromotionInterval);
  const double fp32 = std::ldexp(1.0, -24);
  auto gamma = [](double count, double unit) { return count * unit / (1 - count * unit); };
  return (gamma(n - 1, u) + gamma(blocks, fp32) + gamma(static_cast<double>(K), fp32)) * abs_products * scale;
}

// x with `bits` significant bits: truncated toward zero, or rounded to nearest (ties to even).
inline double keep_bits(double x, int bits, bool truncate) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, e - bits);
  const double q = x / ulp;
  return (truncate ? std::trunc(q) : std::nearbyint(q)) * ulp;
}

// The CPU backend with FP8 GEMMs summed as an accumulator of `bits` bits over blocks of `block`
// products would (everything else is the CPU's).
class Fp8AccumulatorEmulation : public cpu::CpuBackend {
 public:
  Fp8AccumulatorEmulation(int64_t block, int bits, bool truncate)
      : cpu::CpuBackend(0), block_(block), bits_(bits), truncate_(truncate) {}

  ops::Weight upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols, float activation_scaling_factor,
                                float weights_scaling_factor) override {
    const ops::Weight w =
        cpu::CpuBackend::upload_weight_fp8(q, rows, cols, activation_scaling_factor, weights_scaling_factor);
    Held& h = held_[w.data];
    h.w.resize(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < h.w.size(); ++i) h.w[i] = quant::e4m3_to_float(q[i]);
    h.cols = cols;
    h.s_x = activation_scaling_factor;
    h.s_w = weights_scaling_factor;
    return w;
  }

  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override {
    const auto it = held_.find(B.data);
    if (B.dtype != DType::kFloat8E4M3 || it == held_.end()) return cpu::CpuBackend::gemm(M, N, K, A, B, trans_b, C, beta);
    const Held& h = it->second;
    const float* a = A.fp32();
    float* c = C.fp32();
    const float inv = 1.0f / h.s_x, scale = h.s_x * h.s_w;  // as lib/ops/op_types.h's FP8 arithmetic
    std::vector<float> qa(static_cast<size_t>(K));
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < K; ++k) qa[k] = quant::e4m3_to_float(quant::float_to_e4m3(a[m * K + k] * inv));
      for (int64_t n = 0; n < N; ++n) {
        float acc = 0.0f;
        for (int64_t k0 = 0; k0 < K; k0 += block_) {
          double s = 0.0;
          for (int64_t k = k0; k < std::min(K, k0 + block_); ++k)
            s = keep_bits(s + static_cast<double>(qa[k]) * h.w[static_cast<size_t>(k * h.cols + n)], bits_, truncate_);
          acc += static_cast<float>(s);
        }
        float& out = c[m * N + n];
        out = acc * scale + (beta != 0.0f ? beta * out : 0.0f);
      }
    }
  }

 private:
  struct Held {
    std::vector<float> w;  // [K, N], widened E4M3
    int64_t cols = 0;
    float s_x = 1.0f, s_w = 1.0f;
  };
  int64_t block_;
  int bits_;
  bool truncate_;
  std::map<const void*, Held> held_;
};

}  // namespace ftx::test
