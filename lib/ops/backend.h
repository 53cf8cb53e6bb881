#pragma once
// The op seam: every numeric step of the decoding engine is one call on a Backend. The CPU backend
// (lib/cpu/) is the reference; a CUDA backend (kernels/) implements the same interface, so the
// engine (lib/engine/) never branches on the device.
//
// Conventions shared by every implementation:
//  * Activations (the residual stream, GEMM inputs and outputs, fused QKV rows, attention outputs)
//    are `Act`s (lib/ops/act.h) in the backend's memory, row-major, held in the backend's
//    activation dtype (act_dtype()): fp32 on the CPU; fp16 or bf16 on a GPU running a half model,
//    whose ops then compute in fp32 (accumulation, norm statistics, softmax) and round each result
//    to that dtype once, where it is stored. Every op takes fp32 Acts too (a plain float pointer
//    converts), whatever the backend's dtype, so single ops are tested on fp32 buffers. Biases and
//    norm parameters are fp32 `float*`; so are the logits (the lm_head GEMM's C).
//  * Weight matrices (GEMM operands, the embedding table) are `Weight`s, held in the backend's
//    weight dtype: fp32, or fp16/bf16 on a backend that supports it, whose GEMMs then round the
//    activation operand to that dtype and accumulate in fp32. Weights are stored [in, out] as in
//    FT files (so y = x · W).
//  * The KV cache is a `KvCache` in the backend's KV dtype: fp32, or fp16/bf16 on a GPU holding
//    half weights (K and V rounded as they are stored, widened as they are read), or int8 or FP8
//    E4M3 on any backend asked for it (--int8-kv-cache, --fp8-kv-cache: quantised with the layer's
//    calibrated scale as they are stored, dequantised as they are read; KvCache::scale).
//  * Small per-row metadata (token ids, positions, lengths, cache row indices) is passed as host
//    pointers; a device backend copies it in (it is a few hundred bytes per step).
//  * KV cache, per layer: K and V each [blocks, kv_heads, block_size, head_dim], a pool of blocks
//    of AttentionShape::block_size tokens (the paged cache of lib/engine/kv_cache/). A row (one
//    sequence) is a block table: its slot s lives in block table[s / block_size] at offset
//    s % block_size, and its token t at slot t (t % memory_len for a circular cache,
//    AttentionShape::memory_len; a prefix prompt's slots come first, see the engine). Rows advance
//    independently (no lock-step padding gap) and may share blocks (the engine copies a shared
//    block before an op writes into it).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "formats/dtype.h"
#include "lib/decoding/logits_device.h"
#include "lib/decoding/row_sampling.h"
#include "lib/model/blocks.h"
#include "lib/ops/act.h"
#include "lib/ops/int4_matrix.h"
#include "lib/ops/op_types.h"

namespace ftx::ops {

// A LogitsDevice for the decoder (lib/decoding/logits_device.h): sample_rows and download below.
class Backend : public decoding::LogitsDevice {
 public:
  ~Backend() override = default;
  virtual std::string name() const = 0;

  // GEMM algorithms tuned by `ftx gemm-tune`: `explicit_path` (generate's --gemm-config) or else
  // <model_dir>/gemm_config.in or ./gemm_config.in. A GPU backend uses the file's algorithm for
  // each GEMM it lists (refusing a file from another GPU or data type, with a warning); the CPU
  // backend has no algorithm to choose and ignores it.
  virtual void use_gemm_config(const std::string& explicit_path, const std::string& model_dir) {
    (void)explicit_path;
    (void)model_dir;
  }

  // ---- weights ----
  // The dtype this backend holds weight matrices in (fp32 unless it was built for half precision).
  virtual DType weight_dtype() const { return DType::kFloat32; }
  // Copies n elements of a host weight matrix in `src_dtype` (fp32, fp16 or bf16) into backend
  // memory, converted to weight_dtype(); release with release_weight(). The default converts on
  // the host and holds fp32.
  virtual Weight upload_weight(const void* src, DType src_dtype, size_t n);
  virtual void release_weight(const Weight& w);
  // A [rows, cols] matrix that is only ever a GEMM's B operand, never transposed (layer weights):
  // the backend may hold it in a layout of its own (Weight::panel_cols). The default is upload_weight.
  virtual Weight upload_weight_matrix(const void* src, DType src_dtype, int64_t rows, int64_t cols) {
    return upload_weight(src, src_dtype, static_cast<size_t>(rows) * static_cast<size_t>(cols));
  }

  // A host [rows, cols] matrix quantised per output column by FT's rule (quantize_int8_columns, host_math.h)
  // into backend memory: rows·cols int8 values and cols fp32 scales (weight-only INT8, FT's
  // int8_mode 1: the GEMMs read int8, with A in the model's float type, Weight::input_dtype).
  virtual Weight upload_weight_int8(const void* src, DType src_dtype, int64_t rows, int64_t cols);
  // A host [rows, cols] table quantised per row into backend memory: rows·cols int8 values and rows
  // fp32 scales; a GEMM uses it transposed (trans_b), scaling output n by scale[n] (--int8-lm-head).
  // A backend without that GEMM says so here.
  Weight upload_weight_int8_rows(const void* src, DType src_dtype, int64_t rows, int64_t cols);
  virtual bool int8_lm_head_supported() const { return false; }
  // A host int8 [rows, cols] matrix and its per-column factors alpha_col[cols] into backend
  // memory as a SmoothQuant W8A8 weight; act_scale 0 = per-token (see Weight). Release with release_weight().
  virtual Weight upload_weight_w8a8(const int8_t* q, int64_t rows, int64_t cols, const float* alpha_col,
                                    float act_scale, float out_scale);
  // A host E4M3 [rows, cols] matrix and its two per-tensor scales into backend memory as an FP8
  // weight (Weight::activation_scaling_factor, weights_scaling_factor). Release with release_weight().
  virtual Weight upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols, float activation_scaling_factor,
                                   float weights_scaling_factor);
  // An INT4 weight-only matrix (lib/ops/int4_matrix.h: 4-bit values in groups along K with fp32
  // scales and optional zero points) into backend memory, held in 4 bits; its GEMMs round A to
  // input_dtype (the model's float type) and compute the arithmetic int4_matrix.h states. Release with
  // release_weight(). The default refuses: a backend without an INT4 GEMM says so by name.
  virtual Weight upload_weight_int4(const Int4Matrix& m, DType input_dtype);
  // FP8 GEMMs and an FP8 KV cache need FP8 arithmetic: a device without it refuses them here, an
  // Error naming the device and `flag` (what asked for FP8). The CPU emulates it and never refuses.
  virtual void require_fp8(const std::string& flag) const { (void)flag; }

  // The logits GEMM's N (the vocabulary) is padded to a multiple of this: the lm_head table (wte
  // when tied) and its bias get zero rows up to it, and the padding logits are never read. FT pads
  // to 8 for half-precision GEMMs, whose tensor-core kernels want 16-byte-aligned rows; 1: none.
  virtual int64_t vocab_pad_multiple() const { return 1; }

  // The dtype this backend holds an unquantised KV cache in (fp32 unless it was built for half
  // precision); an int8 or FP8 cache is the caller's choice (--int8-kv-cache, --fp8-kv-cache).
  virtual DType kv_dtype() const { return DType::kFloat32; }
  // A KV cache of n elements of `dtype` (kv_dtype(), int8 or FP8 E4M3; the int8 and FP8 bytes travel
  // in float-sized units of alloc(), padded to a whole float).
  virtual KvCache alloc_kv(size_t n, DType dtype);
  KvCache alloc_kv(size_t n) { return alloc_kv(n, kv_dtype()); }
  virtual void release_kv(const KvCache& c) { release(static_cast<float*>(c.data)); }

  // ---- repeated steps ----
  // The ops between begin_repeatable(key) and end_repeatable() recur, whenever `key` recurs, with
  // the same shapes, buffers and order; only the host metadata they are given (ids, positions,
  // cache rows, lengths) changes. A GPU backend may capture them once as a CUDA graph and then
  // replay it, each op only copying its metadata. Nothing in between may wait for results
  // (download) or allocate. Use RepeatableStep, which aborts the step when an op throws.
  // forget_repeatables() drops every recording (buffers they used were released).
  virtual void begin_repeatable(const std::string& key) { (void)key; }
  virtual void end_repeatable() {}
  virtual void abort_repeatable() {}
  virtual void forget_repeatables() {}

  // Bytes this backend can still allocate: free device memory on a GPU; on the CPU the host's
  // MemAvailable, lowered to the cgroup's memory.max headroom when one is set. Used to refuse a
  // run that cannot fit before allocating it.
  virtual size_t available_memory() const;

  // ---- memory (counts are in floats) ----
  // fp32 buffers: biases, norm parameters, logits, and the tests' single-op operands.
  virtual float* alloc(size_t n) = 0;
  virtual void release(float* p) = 0;
  virtual void upload(float* dst, const float* host_src, size_t n) = 0;
  void download(float* host_dst, const float* src, size_t n) override = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  virtual void fill(float* dst, float value, size_t n) = 0;

  // ---- activations (counts are in elements of act_dtype()) ----
  // The float type activations are held in (lib/ops/act.h): fp32 unless the backend runs a half
  // model end to end.
  virtual DType act_dtype() const { return DType::kFloat32; }
  // The defaults serve an fp32 act_dtype() through the float buffers above.
  virtual Act alloc_act(size_t n);
  virtual void release_act(const Act& a);
  // Host fp32 values in and out of activations, rounded to (widened from) their dtype.
  virtual void upload_act(const Act& dst, const float* host_src, size_t n);
  virtual void download_act(float* host_dst, const Act& src, size_t n);
  // dst := src, n elements of one dtype (memmove semantics).
  virtual void copy_act(const Act& dst, const Act& src, size_t n);
  // dst[i·dst_pitch + j] := src[i·src_pitch + j] for i < height, j < width (elements; distinct
  // buffers): joining the ranks' slices of a split embedding or lm_head. The defaults copy row by row.
  virtual void copy_act_2d(const Act& dst, int64_t dst_pitch, const Act& src, int64_t src_pitch, int64_t width,
                           int64_t height);
  virtual void copy_2d(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width,
                       int64_t height);

  // ---- linear algebra ----
  // C[M,N] = A[M,K] · B + beta·C, B row-major [K,N] or, with trans_b, [N,K] (embedding tables).
  // A half-precision B means: A rounded to B's dtype, products summed in fp32.
  // An int8 B (never transposed) means C = (A' · q) · diag(scale), summed in fp32, where A' is A
  // rounded to B.input_dtype (A itself for fp32); a W8A8 one
  // (Weight::w8a8) means the int8 × int8 GEMM defined at the end of this file.
  // C is rounded to its own dtype once, after the sum (and beta·C) is taken in fp32: an fp32 C
  // (the logits) keeps the whole sum whatever A's dtype.
  virtual void gemm(int64_t M, int64_t N, int64_t K, Act A, const Weight& B, bool trans_b, Act C,
                    float beta) = 0;

  // ---- mixture of experts ----
  // out[rows, hidden] = the experts' FFN of in[rows, hidden] (a rank's partial sum, see MoeLayer):
  //  1. router logits l = in · router, an fp32 GEMM output (gemm's rules: A rounded to the router's
  //     dtype, fp32 sums);
  //  2. per row, in fp32: p = softmax(l) over all experts (the exponentials summed in double), the
  //     top_k largest p in descending order (equal p: the lower expert first), renormalised to sum
  //     to 1 for MoeRouting::kSoftmaxTopKRenorm (Σ taken in double, each p divided in fp32);
  //  3. y_e = act(in · fc_e + fc_bias_e) [· (in · gate_e)] · proj_e + proj_bias_e for the rows
  //     routed to expert e, for each expert this rank holds (MoeLayer::holds; the biases when
  //     MoeLayer has them), each GEMM, the activation and the bias add with gemm's,
  //     bias_activation's and add_bias's arithmetic for the weight's kind (a half or weight-only
  //     INT8 expert rounds its A to the weight's input dtype; the expert's weights read once for
  //     all its rows);
  //  4. out[r] = Σ_k p_k · y_{e_k}[r] in fp32 over the row's choices this rank holds, in the order
  //     of step 2, from 0 (so a row's sum does not depend on which other rows share the call; a row
  //     none of whose experts are here gets 0);
  //  5. with a shared expert (shared_inter > 0): s = act(in · shared_fc) [· (in · shared_gate)] ·
  //     shared_proj over every row (step 3's arithmetic), w[r] = 1 / (1 + exp(-(in · shared_weigher)[r]))
  //     (the GEMM an fp32 output as in step 1, the sigmoid in fp32; 1 without a weigher), and
  //     out[r] += w[r] · s[r] in fp32, after step 4. The weight multiplies this rank's partial s, so
  //     the ranks' sum is the whole shared expert weighed (it stays sliced over the ranks when the
  //     routed experts are whole).
  // out may be in (GPT-J-style parallel residual blocks pass one buffer): every row of in is read
  // before out is written.
  // The default refuses, naming the backend: a backend without the op says so instead of
  // computing something else.
  virtual void moe_ffn(Act out, Act in, int64_t rows, const MoeLayer& layer);

  // ---- elementwise / normalisation ----
  // out[r] = (x[r] - mean) / sqrt(var + eps) · gamma + beta   (biased variance, as torch).
  virtual void layer_norm(Act out, Act x, const float* gamma, const float* beta,
                          int64_t rows, int64_t H, float eps) = 0;
  // x += y + bias (y and bias may be null); then, when gamma is set, norm_out = LN(x).
  // The fused residual step between sub-blocks.
  virtual void add_residual_layer_norm(Act x, Act y, const float* bias,
                                       const float* gamma, const float* beta, Act norm_out,
                                       int64_t rows, int64_t H, float eps) = 0;
  // RMSNorm (ModelConfig::normalization): out[r] = x[r] / sqrt(mean(x[r]²) + eps) · gamma
  // (the mean of squares summed in double, as layer_norm's moments; out may equal x).
  virtual void rms_norm(Act out, Act x, const float* gamma, int64_t rows, int64_t H, float eps) = 0;
  // add_residual_layer_norm for RMSNorm models: x += y + bias; then, when gamma is set,
  // norm_out = rms_norm(x).
  virtual void add_residual_rms_norm(Act x, Act y, const float* bias, const float* gamma,
                                     Act norm_out, int64_t rows, int64_t H, float eps) = 0;
  // QK-norm (Qwen3's and Gemma 3's q_norm / k_norm): in each of `rows` fused QKV rows (row stride
  // `stride` elements, the layout of AttentionShape::qkv_width), each of the q_heads Q heads and
  // kv_heads K heads (head_dim values each; V untouched) becomes rms_norm's formula over that head,
  // in place: x / sqrt(mean(x²) + eps) · gamma_q (Q heads) or gamma_k (K heads), gammas [head_dim]
  // (a checkpoint's (1 + w) form is added at load). Before rotary, as the models apply it.
  virtual void head_rms_norm(Act qkv, int64_t rows, int64_t stride, int64_t q_heads, int64_t kv_heads,
                             int64_t head_dim, const float* gamma_q, const float* gamma_k, float eps) = 0;
  // x[rows,N] = cap · tanh(x / cap) in fp32, in place (Gemma 2's final_logit_softcapping on the logits).
  virtual void softcap(float* x, int64_t rows, int64_t N, float cap) = 0;
  // x[rows,N] += bias[N].
  virtual void add_bias(Act x, const float* bias, int64_t rows, int64_t N) = 0;
  // x = act(x + bias); gated (gate != null, SwiGLU/GeGLU): x = act(x + bias) · (gate + gate_bias).
  // Biases may be null.
  virtual void bias_activation(Act x, const float* bias, Act gate, const float* gate_bias,
                               int64_t rows, int64_t N, Activation act) = 0;

  // ---- embeddings and positions ----
  // out[r] = wte[ids[r]]·scale + position term for positions[r]; wpe row = position + offset.
  virtual void embedding(Act out, const Weight& wte, const float* wpe, PositionTable table,
                         int64_t position_offset, const int32_t* ids, const int32_t* positions,
                         int64_t rows, int64_t H, float scale) = 0;
  // Rotates the first rot_dim dims of each of the first `heads` heads of every row of qkv
  // (row stride `stride` elements): Q heads and K heads, which lie first in the fused layout.
  // Angle for pair i: positions[r] · freq.inv_freq(rot_dim)[i] (base^(-2i/rot_dim), scaled as the
  // model's rope scaling says), taken in double; cos and sin times freq.magnitude.
  virtual void rotary(Act qkv, int64_t rows, int64_t stride, const int32_t* positions,
                      int64_t heads, int64_t head_dim, int64_t rot_dim, RotaryStyle style,
                      const RotaryFrequencies& freq) = 0;

  // ---- attention ----
  // Prefill, or an append to rows that already hold past[b] slots (past null: none). qkv:
  // [B, S, qkv_width] (right-padded, row b valid for t < lengths[b]). Writes K,V of the valid
  // tokens to row b (block table tables.row(b)) at slots [past[b], past[b] + lengths[b]) and
  // out[b,t] = causal softmax attention of slot past[b] + t over slots [0, past[b] + t] (padded
  // query positions get zeros). With a circular cache the slots must not wrap (the engine feeds a
  // wrapping append one token at a time, as FT's continue_gen does). The blocks written are the
  // rows' own (the engine has copied shared ones).
  virtual void context_attention(Act out, Act qkv, int64_t B, int64_t S,
                                 const int32_t* lengths, const BlockTables& tables, const KvCache& k_cache,
                                 const KvCache& v_cache, const AttentionShape& shape,
                                 const int32_t* past = nullptr) = 0;
  // One decode step for n rows: token r is written to row r (tables.row(r)) at slot past[r] and
  // attends to slots [0, past[r]] (the last memory_len of them when the cache is circular).
  // Both attentions cap the scores (AttentionShape::softcap) and mask keys behind a sliding window
  // (AttentionShape::window) when the shape says so.
  virtual void decode_attention(Act out, Act qkv, int64_t n, const BlockTables& tables,
                                const int32_t* past, const KvCache& k_cache, const KvCache& v_cache,
                                const AttentionShape& shape) = 0;
  // dst[i·dst_pitch + j] := src[i·src_pitch + j] for i < height, j < width, in elements of the
  // caches' dtype (both the same; int8 elements are copied as they are, so both must carry the
  // same scale), dst and src distinct allocations. Growing a cache (more rows or
  // slots per row) copies the old one into the new one so rows keep their histories.
  virtual void copy_kv_2d(const KvCache& dst, int64_t dst_pitch, const KvCache& src, int64_t src_pitch,
                          int64_t width, int64_t height) = 0;
  // cache row dst[i] := old row src[i] for i < n, all reads before any write; row_elems in
  // elements of the cache's dtype. The paged cache's copy on write: a "row" is one block
  // (AttentionShape::block_elems()), copied before a sequence writes into a block it shared.
  virtual void gather_cache_rows(const KvCache& cache, const int32_t* dst, const int32_t* src, int64_t n,
                                 int64_t row_elems) = 0;

  // ---- decoding ----
  // One token per entry of batch.rows from logits [rows, stride] in this backend's memory (the
  // first `vocab` columns of each row are read, stride >= vocab the padded vocabulary): the row is
  // processed and sampled with exactly the CPU decoder's arithmetic (lib/decoding/row_sampling.h);
  // out[i] (host memory) is batch.rows[i]'s token and log probs. Each row at most once (Error). The sampled rows' logits are left
  // unspecified (a backend processes them in place).
  // Only these cross to the host, so a device backend need not download the logits. Not inside a
  // repeatable step (it waits for its results). The default downloads the rows and runs
  // decoding::sample_rows_on_host, the reference every implementation is tested against.
  void sample_rows(float* logits, int64_t stride, int64_t vocab, const decoding::RowSamplingBatch& batch,
                   decoding::SampledToken* out) override;

  // ---- prompt scoring ----
  // out[r] (host memory) := log_softmax(row r)[targets[r]] for r < rows, over the first `vocab`
  // columns of logits [rows, stride] in this backend's memory: l[t] - max - log Σ exp(l - max), the
  // exponentials summed in double (a row with a NaN gives NaN). targets (host) must lie in
  // [0, vocab) (Error otherwise). The logits are left as they were. Not inside a repeatable step
  // (it waits for its results). The default downloads the rows and computes on the host
  // (host_token_log_probs, the reference every implementation is tested against).
  virtual void token_log_probs(const float* logits, int64_t rows, int64_t stride, int64_t vocab,
                               const int32_t* targets, float* out);
};

// Backend::token_log_probs on host logits.
void host_token_log_probs(const float* logits, int64_t rows, int64_t stride, int64_t vocab, const int32_t* targets,
                          float* out);
// Error unless every target lies in [0, vocab) (what token_log_probs checks first).
void check_log_prob_targets(const int32_t* targets, int64_t rows, int64_t vocab);

// Scope of one repeated step: begins it, finish() ends it, leaving the scope without finish()
// (an exception) aborts it.
class RepeatableStep {
 public:
  RepeatableStep(Backend& backend, const std::string& key) : backend_(backend) { backend_.begin_repeatable(key); }
  void finish() {
    done_ = true;
    backend_.end_repeatable();
  }
  ~RepeatableStep() {
    if (!done_) backend_.abort_repeatable();
  }
  RepeatableStep(const RepeatableStep&) = delete;
  RepeatableStep& operator=(const RepeatableStep&) = delete;

 private:
  Backend& backend_;
  bool done_ = false;
};

// The backend for `device` ("cpu"; "cuda" only when built in, else Error). weight_dtype: what the
// backend holds weight matrices in (fp32, fp16 or bf16; UsageError otherwise).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      DType weight_dtype = DType::kFloat32);

}  // namespace ftx::ops
