// CudaBackend's elementwise, norm (QK-norm too), softcap, embedding and rotary ops: each checks its
// activations' dtype, stages the host metadata it has (ids, positions, frequencies) and calls its launcher
// (kernels/norms/, embeddings/, attention/'s rotary); while a recorded step is replayed it stages
// its metadata and launches nothing.
#include <cmath>
#include <string>
#include <vector>

#include "formats/error.h"
#include "kernels/attention/rotary_kernels.h"
#include "kernels/cuda_backend/act_kinds.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/embeddings/embedding_kernels.h"
#include "kernels/norms/head_norm_kernels.h"
#include "kernels/norms/norm_kernels.h"

namespace ftx::cuda {

void CudaBackend::layer_norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t rows,
                             int64_t H, float eps) {
  // x is only read: the kernel writes x back only when a residual (y or bias) is given.
  if (replaying()) return;
  invoke_add_residual_layer_norm(stream_, same_act_kind({out, x}, "layer_norm"), x.data, nullptr, nullptr, gamma,
                                 beta, out.data, rows, H, eps);
}

void CudaBackend::add_residual_layer_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma,
                                          const float* beta, ops::Act norm_out, int64_t rows, int64_t H, float eps) {
  if (replaying()) return;
  invoke_add_residual_layer_norm(stream_, same_act_kind({x, y, norm_out}, "add_residual_layer_norm"), x.data, y.data,
                                 bias, gamma, beta, norm_out.data, rows, H, eps);
}

void CudaBackend::rms_norm(ops::Act out, ops::Act x, const float* gamma, int64_t rows, int64_t H, float eps) {
  if (replaying()) return;
  invoke_add_residual_rms_norm(stream_, same_act_kind({out, x}, "rms_norm"), x.data, nullptr, nullptr, gamma,
                               out.data, rows, H, eps);
}

void CudaBackend::add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma,
                                        ops::Act norm_out, int64_t rows, int64_t H, float eps) {
  if (replaying()) return;
  invoke_add_residual_rms_norm(stream_, same_act_kind({x, y, norm_out}, "add_residual_rms_norm"), x.data, y.data,
                               bias, gamma, norm_out.data, rows, H, eps);
}

void CudaBackend::head_rms_norm(ops::Act qkv, int64_t rows, int64_t stride, int64_t q_heads, int64_t kv_heads,
                                int64_t head_dim, const float* gamma_q, const float* gamma_k, float eps) {
  if (replaying()) return;
  invoke_head_rms_norm(stream_, act_kind(qkv, "head_rms_norm"), qkv.data, rows, stride, q_heads, kv_heads, head_dim,
                       gamma_q, gamma_k, eps);
}

void CudaBackend::softcap(float* x, int64_t rows, int64_t N, float cap) {
  if (!(cap > 0.0f) || !std::isfinite(cap))
    throw Error("CUDA softcap: cap " + std::to_string(cap) + " is not a positive number");
  if (replaying()) return;
  invoke_softcap(stream_, x, rows, N, cap);
}

void CudaBackend::add_bias(ops::Act x, const float* bias, int64_t rows, int64_t N) {
  if (replaying()) return;
  invoke_add_bias(stream_, act_kind(x, "add_bias"), x.data, bias, rows, N);
}

void CudaBackend::bias_activation(ops::Act x, const float* bias, ops::Act gate, const float* gate_bias, int64_t rows,
                                  int64_t N, Activation act) {
  if (replaying()) return;
  invoke_add_bias_activation(stream_, same_act_kind({x, gate}, "bias_activation"), x.data, bias, gate.data,
                             gate_bias, rows, N, act.nonlinearity());
}

void CudaBackend::embedding(ops::Act out, const ops::Weight& wte, const float* wpe, ops::PositionTable table,
                            int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows,
                            int64_t H, float scale) {
  if (rows <= 0) return;
  const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  const auto dev = stage({{ids, bytes}, {positions, bytes}});
  if (replaying()) return;
  invoke_embedding_lookup(stream_, out.data, act_kind(out, "embedding"), wte.data, elem_kind(wte.dtype), wpe,
                          table, position_offset, static_cast<const int32_t*>(dev[0]),
                          static_cast<const int32_t*>(dev[1]), rows, H, scale);
}

void CudaBackend::rotary(ops::Act qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads,
                         int64_t head_dim, int64_t rot_dim, RotaryStyle style, const ops::RotaryFrequencies& freq) {
  if (rot_dim <= 0 || rows <= 0) return;
  // The frequencies come from the host, as the CPU's (rope_inv_freq), so both take the same angles.
  const std::vector<double> inv_freq = freq.inv_freq(rot_dim);
  const auto dev = stage({{positions, static_cast<size_t>(rows) * sizeof(int32_t)},
                          {inv_freq.data(), inv_freq.size() * sizeof(double)}});
  if (replaying()) return;
  invoke_rotary(stream_, act_kind(qkv, "rotary"), qkv.data, rows, stride, static_cast<const int32_t*>(dev[0]), heads,
                head_dim, rot_dim, style == RotaryStyle::kInterleaved, static_cast<const double*>(dev[1]),
                freq.magnitude);
}
}  // namespace ftx::cuda
