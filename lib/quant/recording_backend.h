#pragma once
// RecordingBackend: an ops::Backend that forwards every call to another backend and, for the GEMMs
// whose weight it was told about, records TensorRT-LLM's calibration statistics (smoothquant.py
// `capture_activation_range`): per input channel max |A| ("x") and per output column max |A·W + b|
// ("y"; the GEMM's own bias is added here, as an nn.Linear/Conv1D output includes it).
//
// Why a wrapper and not a hook in the engine: every GEMM the engine runs is already one
// Backend::gemm call with the weight as an argument, so matching the weight pointer identifies the
// layer and GEMM without a single line in lib/engine. Calibration runs the unsplit model (TP 1), so
// the recorded ranges are those of the full tensors.
//
// It also records, per layer, max |K| and max |V| of the tokens each step stores in the KV cache
// (the fused qkv rows context_attention and decode_attention receive, after rotary: exactly what a
// cache holds), for the FP8 KV-cache scale. The n-th attention call of a step is layer n (the
// engine runs the layers in order, one call each), so record_kv(layers) is told how many there are.
// Both calls count: a sliding-window model's sample longer than its window is not one prefill.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/ops/backend.h"

namespace ftx::quant {

struct GemmStats {
  std::vector<float> x, y;  // max |input| per input channel, max |output| per output column
};

class RecordingBackend : public ops::Backend {
 public:
  explicit RecordingBackend(ops::Backend& inner) : in_(inner) {}

  // GEMMs with weight `w` are recorded under `key`; `bias` (host, n_out floats, may be empty) is
  // added to the output before its maximum is taken.
  void watch(const ops::Weight& w, const std::string& key, std::vector<float> bias);
  const std::map<std::string, GemmStats>& stats() const { return stats_; }
  // Records K and V of every attention call; the calls cycle over `layers` layers.
  void record_kv(int64_t layers) { kv_.assign(static_cast<size_t>(layers), {}); }
  // Per layer: max |K|, max |V| (empty unless record_kv was called).
  const std::vector<std::pair<float, float>>& kv_stats() const { return kv_; }

  std::string name() const override { return in_.name(); }
  void use_gemm_config(const std::string& p, const std::string& d) override { in_.use_gemm_config(p, d); }
  DType weight_dtype() const override { return in_.weight_dtype(); }
  ops::Weight upload_weight(const void* src, DType t, size_t n) override { return in_.upload_weight(src, t, n); }
  ops::Weight upload_weight_matrix(const void* src, DType t, int64_t rows, int64_t cols) override {
    return in_.upload_weight_matrix(src, t, rows, cols);
  }
  ops::Weight upload_weight_int8(const void* src, DType t, int64_t rows, int64_t cols) override {
    return in_.upload_weight_int8(src, t, rows, cols);
  }
  ops::Weight upload_weight_int4(const ops::Int4Matrix& m, DType input_dtype) override {
    return in_.upload_weight_int4(m, input_dtype);
  }
  void release_weight(const ops::Weight& w) override { in_.release_weight(w); }
  DType kv_dtype() const override { return in_.kv_dtype(); }
  void require_fp8(const std::string& flag) const override { in_.require_fp8(flag); }
  // begin/end_repeatable keep the base's no-ops: recording downloads results in the middle of a
  // step, so no step may be captured for replay.
  using ops::Backend::alloc_kv;
  ops::KvCache alloc_kv(size_t n, DType t) override { return in_.alloc_kv(n, t); }
  void release_kv(const ops::KvCache& c) override { in_.release_kv(c); }
  size_t available_memory() const override { return in_.available_memory(); }
  float* alloc(size_t n) override { return in_.alloc(n); }
  void release(float* p) override { in_.release(p); }
  void upload(float* d, const float* s, size_t n) override { in_.upload(d, s, n); }
  void download(float* d, const float* s, size_t n) override { in_.download(d, s, n); }
  void copy(float* d, const float* s, size_t n) override { in_.copy(d, s, n); }
  void fill(float* d, float v, size_t n) override { in_.fill(d, v, n); }
  DType act_dtype() const override { return in_.act_dtype(); }
  ops::Act alloc_act(size_t n) override { return in_.alloc_act(n); }
  void release_act(const ops::Act& a) override { in_.release_act(a); }
  void upload_act(const ops::Act& d, const float* s, size_t n) override { in_.upload_act(d, s, n); }
  void download_act(float* d, const ops::Act& s, size_t n) override { in_.download_act(d, s, n); }
  void copy_act(const ops::Act& d, const ops::Act& s, size_t n) override { in_.copy_act(d, s, n); }
  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override;
  // The experts' GEMMs run inside the inner backend's op, unseen by watch(): calibration of a
  // mixture of experts is refused before it runs (calibrate.cc).
  void moe_ffn(ops::Act out, ops::Act in, int64_t rows, const ops::MoeLayer& layer) override {
    in_.moe_ffn(out, in, rows, layer);
  }
  void layer_norm(ops::Act out, ops::Act x, const float* g, const float* b, int64_t rows, int64_t H,
                  float eps) override {
    in_.layer_norm(out, x, g, b, rows, H, eps);
  }
  void add_residual_layer_norm(ops::Act x, ops::Act y, const float* bias, const float* g, const float* b,
                               ops::Act norm_out, int64_t rows, int64_t H, float eps) override {
    in_.add_residual_layer_norm(x, y, bias, g, b, norm_out, rows, H, eps);
  }
  void add_bias(ops::Act x, const float* bias, int64_t rows, int64_t N) override { in_.add_bias(x, bias, rows, N); }
  void head_rms_norm(ops::Act qkv, int64_t rows, int64_t stride, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                     const float* gamma_q, const float* gamma_k, float eps) override {
    in_.head_rms_norm(qkv, rows, stride, q_heads, kv_heads, head_dim, gamma_q, gamma_k, eps);
  }
  void softcap(float* x, int64_t rows, int64_t N, float cap) override { in_.softcap(x, rows, N, cap); }
  void rms_norm(ops::Act out, ops::Act x, const float* g, int64_t rows, int64_t H, float eps) override {
    in_.rms_norm(out, x, g, rows, H, eps);
  }
  void add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* g, ops::Act norm_out,
                             int64_t rows, int64_t H, float eps) override {
    in_.add_residual_rms_norm(x, y, bias, g, norm_out, rows, H, eps);
  }
  void bias_activation(ops::Act x, const float* bias, ops::Act gate, const float* gate_bias, int64_t rows,
                       int64_t N, Activation act) override {
    in_.bias_activation(x, bias, gate, gate_bias, rows, N, act);
  }
  void embedding(ops::Act out, const ops::Weight& wte, const float* wpe, ops::PositionTable table, int64_t off,
                 const int32_t* ids, const int32_t* positions, int64_t rows, int64_t H, float scale) override {
    in_.embedding(out, wte, wpe, table, off, ids, positions, rows, H, scale);
  }
  void rotary(ops::Act qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads, int64_t head_dim,
              int64_t rot_dim, RotaryStyle style, const ops::RotaryFrequencies& freq) override {
    in_.rotary(qkv, rows, stride, positions, heads, head_dim, rot_dim, style, freq);
  }
  void context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                         const ops::BlockTables& tables, const ops::KvCache& k, const ops::KvCache& v,
                         const ops::AttentionShape& shape, const int32_t* past) override;
  void decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables, const int32_t* past,
                        const ops::KvCache& k, const ops::KvCache& v, const ops::AttentionShape& shape) override;
  void copy_kv_2d(const ops::KvCache& dst, int64_t dp, const ops::KvCache& src, int64_t sp, int64_t width,
                  int64_t height) override {
    in_.copy_kv_2d(dst, dp, src, sp, width, height);
  }
  void gather_cache_rows(const ops::KvCache& cache, const int32_t* dst, const int32_t* src, int64_t n,
                         int64_t row_elems) override {
    in_.gather_cache_rows(cache, dst, src, n, row_elems);
  }

 private:
  struct Watched {
    std::string key;
    std::vector<float> bias;
  };
  ops::Backend& in_;
  // max |K|, max |V| of `n` fused qkv rows into `range`.
  void record_kv_rows(std::pair<float, float>& range, const float* rows, int64_t n, const ops::AttentionShape& shape);

  std::map<const void*, Watched> watched_;
  std::map<std::string, GemmStats> stats_;
  std::vector<float> host_a_, host_c_;
  std::vector<std::pair<float, float>> kv_;
  size_t attention_calls_ = 0;
};

}  // namespace ftx::quant
