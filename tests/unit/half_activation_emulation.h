#pragma once
// An engine-level emulation of the CUDA backend's half activations, on the CPU (for
// engine_half_gpu_test.cc). A half model on CUDA holds every activation buffer (Backend::alloc_act:
// the residual stream, norm outputs, fused QKV rows, attention outputs, FFN intermediates) in
// fp16/bf16; each kernel widens what it reads, computes in fp32 and rounds once where it stores
// (kernels/cuda_backend/cuda_backend.h); the KV cache holds K and V as the QKV rows held them; the
// logits (Backend::alloc) stay fp32. This backend is the CPU's with half weights (GEMMs round A to
// the weights' dtype and sum in fp32) whose ops round every output that lies in an activation buffer
// to the half type after computing it in fp32: the same roundings at the same places, so the GPU
// can be held to its rounding flips rather than to the whole distance between half and fp32.
//
// `nudge` > 0 moves each value by that relative amount, in a pseudo-random direction, before it is
// rounded: a second run then shows how far values that lie within a GPU's summation-order noise of a
// rounding boundary (and flip) move the logits.
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/half_rounding.h"

namespace ftx::test {

class HalfActivationEmulation : public cpu::CpuBackend {
 public:
  HalfActivationEmulation(DType half, double nudge = 0.0) : cpu::CpuBackend(0, half), half_(half), nudge_(nudge) {}

  ops::Act alloc_act(size_t n) override {
    const ops::Act a = cpu::CpuBackend::alloc_act(n);
    held_[static_cast<const float*>(a.data)] = n;
    return a;
  }
  void release_act(const ops::Act& a) override {
    held_.erase(static_cast<const float*>(a.data));
    cpu::CpuBackend::release_act(a);
  }

  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override {
    cpu::CpuBackend::gemm(M, N, K, A, B, trans_b, C, beta);
    round(C, M * N);
  }
  void layer_norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t rows, int64_t H,
                  float eps) override {
    cpu::CpuBackend::layer_norm(out, x, gamma, beta, rows, H, eps);
    round(out, rows * H);
  }
  void add_residual_layer_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, const float* beta,
                               ops::Act norm_out, int64_t rows, int64_t H, float eps) override {
    cpu::CpuBackend::add_residual_layer_norm(x, y, bias, gamma, beta, norm_out, rows, H, eps);
    round(x, rows * H);
    round(norm_out, rows * H);
  }
  void rms_norm(ops::Act out, ops::Act x, const float* gamma, int64_t rows, int64_t H, float eps) override {
    cpu::CpuBackend::rms_norm(out, x, gamma, rows, H, eps);
    round(out, rows * H);
  }
  void add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, ops::Act norm_out,
                             int64_t rows, int64_t H, float eps) override {
    cpu::CpuBackend::add_residual_rms_norm(x, y, bias, gamma, norm_out, rows, H, eps);
    round(x, rows * H);
    round(norm_out, rows * H);
  }
  void add_bias(ops::Act x, const float* bias, int64_t rows, int64_t N) override {
    cpu::CpuBackend::add_bias(x, bias, rows, N);
    round(x, rows * N);
  }
  void bias_activation(ops::Act x, const float* bias, ops::Act gate, const float* gate_bias, int64_t rows, int64_t N,
                       Activation act) override {
    cpu::CpuBackend::bias_activation(x, bias, gate, gate_bias, rows, N, act);
    round(x, rows * N);
  }
  void embedding(ops::Act out, const ops::Weight& wte, const float* wpe, ops::PositionTable table,
                 int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows, int64_t H,
                 float scale) override {
    cpu::CpuBackend::embedding(out, wte, wpe, table, position_offset, ids, positions, rows, H, scale);
    round(out, rows * H);
  }
  void rotary(ops::Act qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads, int64_t head_dim,
              int64_t rot_dim, RotaryStyle style, const ops::RotaryFrequencies& freqs) override {
    cpu::CpuBackend::rotary(qkv, rows, stride, positions, heads, head_dim, rot_dim, style, freqs);
    round(qkv, rows * stride);
  }
  void context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                         const ops::BlockTables& tables, const ops::KvCache& k, const ops::KvCache& v,
                         const ops::AttentionShape& sh, const int32_t* past) override {
    cpu::CpuBackend::context_attention(out, qkv, B, S, lengths, tables, k, v, sh, past);
    round(out, B * S * sh.q_heads * sh.head_dim);
  }
  void decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables, const int32_t* past,
                        const ops::KvCache& k, const ops::KvCache& v, const ops::AttentionShape& sh) override {
    cpu::CpuBackend::decode_attention(out, qkv, n, tables, past, k, v, sh);
    round(out, n * sh.q_heads * sh.head_dim);
  }

 private:
  // Rounds x[0, n) when it lies in an activation buffer (the logits are not one).
  void round(ops::Act x, int64_t n) {
    auto* p = static_cast<float*>(x.data);
    auto it = held_.upper_bound(p);
    if (n <= 0 || it == held_.begin()) return;
    --it;
    if (p + n > it->first + it->second) return;
    if (nudge_ > 0)
      for (int64_t i = 0; i < n; ++i) {
        state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] *= static_cast<float>(1.0 + ((state_ >> 63) ? nudge_ : -nudge_));
      }
    if (half_ == DType::kFloat16)
      cpu::round_through_fp16(p, static_cast<size_t>(n), p);
    else
      cpu::round_through_bf16(p, static_cast<size_t>(n), p);
  }

  DType half_;
  double nudge_;
  uint64_t state_ = 12345;
  std::map<const float*, size_t> held_;  // activation buffers: start -> elements
};

}  // namespace ftx::test
