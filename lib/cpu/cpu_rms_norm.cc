// RMSNorm on the CPU (Megatron Core / NeMo `normalization: RMSNorm`), over whole rows and over each
// Q and K head of the fused QKV rows (QK-norm), the reference the CUDA twins (kernels/norms/) are
// tested against. The sums are scalar doubles: the same at every ISA level.
#include <cmath>

#include "lib/cpu/cpu_backend.h"

namespace ftx::cpu {

namespace {

// torch.nn.RMSNorm: x · rsqrt(mean(x²) + eps) · gamma; the mean of squares summed in double.
void rms_normalize_row(float* out, const float* x, const float* gamma, int64_t H, float eps) {
  double sq = 0.0;
  for (int64_t i = 0; i < H; ++i) sq += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(H) + static_cast<double>(eps)));
  for (int64_t i = 0; i < H; ++i) out[i] = x[i] * inv * gamma[i];
}

}  // namespace

void CpuBackend::rms_norm(ops::Act out_act, ops::Act x_act, const float* gamma, int64_t rows, int64_t H, float eps) {
  float* out = out_act.fp32();
  const float* x = x_act.fp32();
#pragma omp parallel for if (rows * H >= 16384)
  for (int64_t r = 0; r < rows; ++r) rms_normalize_row(out + r * H, x + r * H, gamma, H, eps);
}

void CpuBackend::head_rms_norm(ops::Act qkv_act, int64_t rows, int64_t stride, int64_t q_heads, int64_t kv_heads,
                               int64_t head_dim, const float* gamma_q, const float* gamma_k, float eps) {
  float* qkv = qkv_act.fp32();
  const int64_t heads = q_heads + kv_heads;  // Q heads, then K heads, from each row's start
#pragma omp parallel for collapse(2) if (rows * heads * head_dim >= 16384)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      float* x = qkv + r * stride + h * head_dim;
      rms_normalize_row(x, x, h < q_heads ? gamma_q : gamma_k, head_dim, eps);
    }
}

void CpuBackend::add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma,
                                       ops::Act norm_out, int64_t rows, int64_t H, float eps) {
  // The residual step is layer_norm's own; only the norm differs.
  add_residual_layer_norm(x, y, bias, nullptr, nullptr, nullptr, rows, H, eps);
  if (gamma) rms_norm(norm_out, x, gamma, rows, H, eps);
}

}  // namespace ftx::cpu
