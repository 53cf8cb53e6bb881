#pragma once
// The CPU implementation of the op seam. GEMMs of up to kWideningStreamRows rows (decode) run in
// ftx's streaming kernel (widening_gemm.h), which reads each weight once per GEMM; more rows
// (prefill) in its tile kernel over widened strips (fp32, fp16, int8 weight-only, FP8), on
// AVX512-BF16 pair tiles or oneDNN (bf16 at the AVX-512 level); SmoothQuant W8A8 in the int8
// kernels (vnni_int8_gemm.h). Every kernel has an AVX-512, an AVX2 and a baseline form, chosen by
// cpu_isa() (cpu_features.h: FTX_CPU_ISA caps it). OpenMP for everything else. Activations, norms
// and the KV cache are fp32 (act_dtype() is the Backend default); weight matrices are held in the
// weight dtype the backend was made for: fp32, or fp16/bf16 (half the bytes), whose GEMMs round
// the activation operand to that dtype and sum in fp32.
#include <cstdint>
#include <memory>
#include <vector>

#include "lib/cpu/int4_gemm.h"
#include "lib/cpu/w8a8_gemm.h"
#include "lib/ops/backend.h"

namespace ftx::cpu {

class DnnlMatmul;

class CpuBackend : public ops::Backend {
 public:
  // threads <= 0: OMP_NUM_THREADS when set, else all cores. Sets both OpenMP and OpenBLAS.
  // weight_dtype: fp32, fp16 or bf16 (Error otherwise).
  explicit CpuBackend(int threads, DType weight_dtype = DType::kFloat32);
  ~CpuBackend() override;
  std::string name() const override { return "cpu"; }
  int threads() const { return threads_; }

  DType weight_dtype() const override { return weight_dtype_; }
  ops::Weight upload_weight(const void* src, DType src_dtype, size_t n) override;
  void release_weight(const ops::Weight& w) override;
  // Layer matrices of every dtype are held in column panels (widening_gemm.h): a few-row GEMM
  // then reads each panel front to back instead of a short segment of every row (one page per row
  // of K: the hardware prefetcher stops at page ends), about 2x the read rate for half weights;
  // one fp32 row streams panels at 0.87x of sgemv's time on row-major weights. The panel width is
  // chosen per matrix so that the threads share it by whole panels (balanced_panel_cols).
  ops::Weight upload_weight_matrix(const void* src, DType src_dtype, int64_t rows, int64_t cols) override;
  ops::Weight upload_weight_int8(const void* src, DType src_dtype, int64_t rows, int64_t cols) override;
  bool int8_lm_head_supported() const override { return true; }
  // W8A8 matrices are packed for AVX512-VNNI (vnni_int8_gemm.h), in the same column panels.
  ops::Weight upload_weight_w8a8(const int8_t* q, int64_t rows, int64_t cols, const float* alpha_col,
                                 float act_scale, float out_scale) override;
  // FP8 matrices stay E4M3 in the same column panels; the widening kernel reads them (widening_gemm.h).
  ops::Weight upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols, float activation_scaling_factor,
                                float weights_scaling_factor) override;

  // INT4 matrices stay 4-bit, in int4_gemm.h's layout (groups as contiguous runs of rows, act-order
  // rows reordered); never transposed.
  ops::Weight upload_weight_int4(const ops::Int4Matrix& m, DType input_dtype) override;

  float* alloc(size_t n) override;
  void release(float* p) override;
  void upload(float* dst, const float* host_src, size_t n) override;
  void download(float* host_dst, const float* src, size_t n) override;
  void copy(float* dst, const float* src, size_t n) override;
  void fill(float* dst, float value, size_t n) override;

  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override;

  // Rows grouped by expert, each expert's GEMMs once over its rows (moe_ffn.h).
  void moe_ffn(ops::Act out, ops::Act in, int64_t rows, const ops::MoeLayer& layer) override;

  void layer_norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t rows, int64_t H,
                  float eps) override;
  void add_residual_layer_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, const float* beta,
                               ops::Act norm_out, int64_t rows, int64_t H, float eps) override;
  void rms_norm(ops::Act out, ops::Act x, const float* gamma, int64_t rows, int64_t H, float eps) override;
  void add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, ops::Act norm_out,
                             int64_t rows, int64_t H, float eps) override;
  void head_rms_norm(ops::Act qkv, int64_t rows, int64_t stride, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                     const float* gamma_q, const float* gamma_k, float eps) override;
  // One std::tanh (glibc's tanhf) per element: a few ms for a 256k vocabulary, beside the lm_head GEMM.
  void softcap(float* x, int64_t rows, int64_t N, float cap) override;
  void add_bias(ops::Act x, const float* bias, int64_t rows, int64_t N) override;
  void bias_activation(ops::Act x, const float* bias, ops::Act gate, const float* gate_bias, int64_t rows, int64_t N,
                       Activation act) override;

  void embedding(ops::Act out, const ops::Weight& wte, const float* wpe, ops::PositionTable table,
                 int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows,
                 int64_t H, float scale) override;
  void rotary(ops::Act qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads,
              int64_t head_dim, int64_t rot_dim, RotaryStyle style, const ops::RotaryFrequencies& freq) override;

  void context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                         const ops::BlockTables& tables, const ops::KvCache& k_cache, const ops::KvCache& v_cache,
                         const ops::AttentionShape& shape, const int32_t* past = nullptr) override;
  void decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables,
                        const int32_t* past, const ops::KvCache& k_cache, const ops::KvCache& v_cache,
                        const ops::AttentionShape& shape) override;
  void copy_kv_2d(const ops::KvCache& dst, int64_t dst_pitch, const ops::KvCache& src, int64_t src_pitch,
                  int64_t width, int64_t height) override;
  void gather_cache_rows(const ops::KvCache& cache, const int32_t* dst, const int32_t* src, int64_t n,
                         int64_t row_elems) override;
  // The logits are host memory already: sampled where they are, no copy.
  void sample_rows(float* logits, int64_t stride, int64_t vocab, const decoding::RowSamplingBatch& batch,
                   decoding::SampledToken* out) override;

 private:
  // C = round(A)·B for an fp16/bf16 B (Backend::gemm's contract for half weights).
  void half_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& B, bool trans_b, float* C,
                 float beta);
  // The FP8 arithmetic of lib/ops/op_types.h for an FP8 B.
  void fp8_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& B, float* C, float beta);
  // Weight-only INT8 (not W8A8): A rounded to B.input_dtype first. trans_b: an --int8-lm-head table.
  void int8_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& B, bool trans_b, float* C,
                 float beta);
  // The INT4 arithmetic of lib/ops/int4_matrix.h for an INT4 B (int4_gemm.h).
  void int4_gemm(int64_t M, int64_t N, int64_t K, const float* A, const ops::Weight& B, float* C, float beta);
  // Runs block(n0, nn) over column blocks of an N-column output, one per thread when worth it.
  template <class Block>
  void for_column_blocks(int64_t M, int64_t N, int64_t K, const Block& block, int64_t align = 16);

  int threads_;
  DType weight_dtype_;
  std::vector<float> a_rounded_;    // half, int8 and FP8 GEMMs: A rounded to the weights' (input) dtype, as fp32
  std::vector<uint16_t> a_bf16_;    // bf16 GEMMs on pair tiles or oneDNN: A as bf16
  std::unique_ptr<DnnlMatmul> dnnl_;  // made on the first bf16 GEMM with many rows
  W8A8Activations w8a8_act_;          // the input of the W8A8 GEMM running now, quantised
  Int4Activations int4_act_;          // the input of the INT4 GEMM running now, in kernel-row order
};

}  // namespace ftx::cpu
