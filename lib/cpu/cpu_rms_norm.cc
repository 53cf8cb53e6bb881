// RMSNorm on the CPU (Megatron Core / NeMo `normalization: RMSNorm`), the reference the CUDA twin
// (kernels/norms/rms_norm_kernels.cu) is tested against.
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

void CpuBackend::add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma,
                                       ops::Act norm_out, int64_t rows, int64_t H, float eps) {
  // The residual step is layer_norm's own; only the norm differs.
  add_residual_layer_norm(x, y, bias, nullptr, nullptr, nullptr, rows, H, eps);
  if (gamma) rms_norm(norm_out, x, gamma, rows, H, eps);
}

}  // namespace ftx::cpu
