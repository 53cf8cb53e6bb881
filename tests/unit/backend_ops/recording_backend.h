#pragma once
// A backend that forwards every virtual op of ops::Backend to another and records the op's name,
// so that the op suite can check that a test calls the ops it says it covers. Its non-virtual
// helpers (alloc_kv(n), upload_weight_int8_rows) are the base class's, built on the virtuals.
#include <memory>
#include <set>
#include <string>

#include "lib/decoding/row_sampling.h"
#include "lib/ops/backend.h"

namespace ftx::test {

class RecordingBackend final : public ops::Backend {
 public:
  RecordingBackend(std::unique_ptr<ops::Backend> inner, std::set<std::string>& called)
      : inner_(std::move(inner)), called_(called) {}
  ops::Backend& inner() { return *inner_; }

  std::string name() const override { return rec("name").name(); }
  void use_gemm_config(const std::string& path, const std::string& model_dir) override {
    rec("use_gemm_config").use_gemm_config(path, model_dir);
  }
  DType weight_dtype() const override { return rec("weight_dtype").weight_dtype(); }
  ops::Weight upload_weight(const void* src, DType t, size_t n) override { return rec("upload_weight").upload_weight(src, t, n); }
  void release_weight(const ops::Weight& w) override { rec("release_weight").release_weight(w); }
  ops::Weight upload_weight_matrix(const void* src, DType t, int64_t rows, int64_t cols) override {
    return rec("upload_weight_matrix").upload_weight_matrix(src, t, rows, cols);
  }
  ops::Weight upload_weight_int8(const void* src, DType t, int64_t rows, int64_t cols) override {
    return rec("upload_weight_int8").upload_weight_int8(src, t, rows, cols);
  }
  bool int8_lm_head_supported() const override { return rec("int8_lm_head_supported").int8_lm_head_supported(); }
  ops::Weight upload_weight_w8a8(const int8_t* q, int64_t rows, int64_t cols, const float* alpha_col, float act_scale,
                                 float out_scale) override {
    return rec("upload_weight_w8a8").upload_weight_w8a8(q, rows, cols, alpha_col, act_scale, out_scale);
  }
  ops::Weight upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols, float s_x, float s_w) override {
    return rec("upload_weight_fp8").upload_weight_fp8(q, rows, cols, s_x, s_w);
  }
  ops::Weight upload_weight_int4(const ops::Int4Matrix& m, DType input_dtype) override {
    return rec("upload_weight_int4").upload_weight_int4(m, input_dtype);
  }
  void require_fp8(const std::string& flag) const override { rec("require_fp8").require_fp8(flag); }
  int64_t vocab_pad_multiple() const override { return rec("vocab_pad_multiple").vocab_pad_multiple(); }
  DType kv_dtype() const override { return rec("kv_dtype").kv_dtype(); }
  using ops::Backend::alloc_kv;
  ops::KvCache alloc_kv(size_t n, DType t) override { return rec("alloc_kv").alloc_kv(n, t); }
  void release_kv(const ops::KvCache& c) override { rec("release_kv").release_kv(c); }

  void begin_repeatable(const std::string& key) override { rec("begin_repeatable").begin_repeatable(key); }
  void end_repeatable() override { rec("end_repeatable").end_repeatable(); }
  void abort_repeatable() override { rec("abort_repeatable").abort_repeatable(); }
  void forget_repeatables() override { rec("forget_repeatables").forget_repeatables(); }
  size_t available_memory() const override { return rec("available_memory").available_memory(); }

  float* alloc(size_t n) override { return rec("alloc").alloc(n); }
  void release(float* p) override { rec("release").release(p); }
  void upload(float* dst, const float* src, size_t n) override { rec("upload").upload(dst, src, n); }
  void download(float* dst, const float* src, size_t n) override { rec("download").download(dst, src, n); }
  void copy(float* dst, const float* src, size_t n) override { rec("copy").copy(dst, src, n); }
  void fill(float* dst, float value, size_t n) override { rec("fill").fill(dst, value, n); }

  DType act_dtype() const override { return rec("act_dtype").act_dtype(); }
  ops::Act alloc_act(size_t n) override { return rec("alloc_act").alloc_act(n); }
  void release_act(const ops::Act& a) override { rec("release_act").release_act(a); }
  void upload_act(const ops::Act& dst, const float* src, size_t n) override { rec("upload_act").upload_act(dst, src, n); }
  void download_act(float* dst, const ops::Act& src, size_t n) override { rec("download_act").download_act(dst, src, n); }
  void copy_act(const ops::Act& dst, const ops::Act& src, size_t n) override { rec("copy_act").copy_act(dst, src, n); }
  void copy_act_2d(const ops::Act& dst, int64_t dst_pitch, const ops::Act& src, int64_t src_pitch, int64_t width,
                   int64_t height) override {
    rec("copy_act_2d").copy_act_2d(dst, dst_pitch, src, src_pitch, width, height);
  }
  void copy_2d(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width,
               int64_t height) override {
    rec("copy_2d").copy_2d(dst, dst_pitch, src, src_pitch, width, height);
  }

  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override {
    rec("gemm").gemm(M, N, K, A, B, trans_b, C, beta);
  }
  void moe_ffn(ops::Act out, ops::Act in, int64_t rows, const ops::MoeLayer& layer) override {
    rec("moe_ffn").moe_ffn(out, in, rows, layer);
  }
  void layer_norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t rows, int64_t H,
                  float eps) override {
    rec("layer_norm").layer_norm(out, x, gamma, beta, rows, H, eps);
  }
  void add_residual_layer_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, const float* beta,
                               ops::Act norm_out, int64_t rows, int64_t H, float eps) override {
    rec("add_residual_layer_norm").add_residual_layer_norm(x, y, bias, gamma, beta, norm_out, rows, H, eps);
  }
  void rms_norm(ops::Act out, ops::Act x, const float* gamma, int64_t rows, int64_t H, float eps) override {
    rec("rms_norm").rms_norm(out, x, gamma, rows, H, eps);
  }
  void add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, ops::Act norm_out,
                             int64_t rows, int64_t H, float eps) override {
    rec("add_residual_rms_norm").add_residual_rms_norm(x, y, bias, gamma, norm_out, rows, H, eps);
  }
  void head_rms_norm(ops::Act qkv, int64_t rows, int64_t stride, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                     const float* gamma_q, const float* gamma_k, float eps) override {
    rec("head_rms_norm").head_rms_norm(qkv, rows, stride, q_heads, kv_heads, head_dim, gamma_q, gamma_k, eps);
  }
  void softcap(float* x, int64_t rows, int64_t N, float cap) override { rec("softcap").softcap(x, rows, N, cap); }
  void add_bias(ops::Act x, const float* bias, int64_t rows, int64_t N) override {
    rec("add_bias").add_bias(x, bias, rows, N);
  }
  void bias_activation(ops::Act x, const float* bias, ops::Act gate, const float* gate_bias, int64_t rows, int64_t N,
                       Activation act) override {
    rec("bias_activation").bias_activation(x, bias, gate, gate_bias, rows, N, act);
  }
  void embedding(ops::Act out, const ops::Weight& wte, const float* wpe, ops::PositionTable table, int64_t offset,
                 const int32_t* ids, const int32_t* positions, int64_t rows, int64_t H, float scale) override {
    rec("embedding").embedding(out, wte, wpe, table, offset, ids, positions, rows, H, scale);
  }
  void rotary(ops::Act qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads, int64_t head_dim,
              int64_t rot_dim, RotaryStyle style, const ops::RotaryFrequencies& freq) override {
    rec("rotary").rotary(qkv, rows, stride, positions, heads, head_dim, rot_dim, style, freq);
  }
  void context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                         const ops::BlockTables& tables, const ops::KvCache& k, const ops::KvCache& v,
                         const ops::AttentionShape& shape, const int32_t* past = nullptr) override {
    rec("context_attention").context_attention(out, qkv, B, S, lengths, tables, k, v, shape, past);
  }
  void decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables, const int32_t* past,
                        const ops::KvCache& k, const ops::KvCache& v, const ops::AttentionShape& shape) override {
    rec("decode_attention").decode_attention(out, qkv, n, tables, past, k, v, shape);
  }
  void copy_kv_2d(const ops::KvCache& dst, int64_t dst_pitch, const ops::KvCache& src, int64_t src_pitch,
                  int64_t width, int64_t height) override {
    rec("copy_kv_2d").copy_kv_2d(dst, dst_pitch, src, src_pitch, width, height);
  }
  void gather_cache_rows(const ops::KvCache& cache, const int32_t* dst, const int32_t* src, int64_t n,
                         int64_t row_elems) override {
    rec("gather_cache_rows").gather_cache_rows(cache, dst, src, n, row_elems);
  }
  void sample_rows(float* logits, int64_t stride, int64_t vocab, const decoding::RowSamplingBatch& batch,
                   decoding::SampledToken* out) override {
    rec("sample_rows").sample_rows(logits, stride, vocab, batch, out);
  }
  void token_log_probs(const float* logits, int64_t rows, int64_t stride, int64_t vocab, const int32_t* targets,
                       float* out) override {
    rec("token_log_probs").token_log_probs(logits, rows, stride, vocab, targets, out);
  }

 private:
  ops::Backend& rec(const char* op) const {
    called_.insert(op);
    return *inner_;
  }

  std::unique_ptr<ops::Backend> inner_;
  std::set<std::string>& called_;
};

}  // namespace ftx::test
