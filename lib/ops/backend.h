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
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/fp8_e4m3.h"
#include "lib/decoding/logits_device.h"
#include "lib/decoding/row_sampling.h"
#include "lib/model/model_config.h"
#include "lib/ops/act.h"

namespace ftx::ops {

// Where the token embeddings' position term comes from.
enum class PositionTable { kNone, kLearned /* wpe[pos + offset] */, kSinusoidal /* fairseq/XGLM */ };

// A weight matrix in the backend's memory and the dtype it is held in. A plain fp32 buffer from
// alloc() converts implicitly, so fp32-only callers need not know about the dtype.
struct Weight {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  // kInt8 only (FT's weight-only int8_mode 1): one scale per output column of the [K, N] matrix,
  // in the backend's memory; the matrix stands for q[k][n] · scale[n].
  const float* scale = nullptr;
  // kInt8 weight-only only: the float type the GEMM rounds A to before multiplying (round to nearest
  // even), the model's (Backend::weight_dtype() at upload). FT's and TensorRT-LLM's weight-only
  // GEMMs take the model's half activations, so an int8 layer of a bf16 model multiplies bf16 A by
  // the int8 values, each product exact, and scales each fp32 sum by scale[n]; fp32: A as it is.
  DType input_dtype = DType::kFloat32;
  // kInt8 weight-only from upload_weight_int8_rows (--int8-lm-head): the matrix is [N, K], one scale
  // per row, and a GEMM uses it transposed only (each the other way round is refused).
  bool int8_rows = false;
  // 0: row-major as stated. > 0 (a [K, N] GEMM operand from upload_weight_matrix on a backend that
  // repacks): column panels of this width, each a row-major [K, width] block (the last one
  // narrower), one after another, so a GEMM streams each panel's rows contiguously.
  int64_t panel_cols = 0;
  // SmoothQuant W8A8 (int8_mode 2; set by upload_weight_w8a8): the GEMM quantises A too and
  // multiplies int8 by int8 (the W8A8 arithmetic at the end of this file). `scale` then holds the per-column factor
  // alpha_col; the int8 matrix is in the backend's own layout (the CUDA backend holds it [N, K]).
  // act_scale > 0: per-tensor, A quantised with this static scale_x_orig_quant and the
  // result scaled by out_scale (scale_y_quant_orig); act_scale == 0: per-token (dynamic).
  bool w8a8 = false;
  float act_scale = 0.0f, out_scale = 1.0f;
  // FP8 (dtype kFloat8E4M3; --fp8, set by upload_weight_fp8): the E4M3 matrix stands for
  // q · weights_scaling_factor, and the GEMM quantises A to E4M3 with the static
  // activation_scaling_factor (the FP8 arithmetic at the end of this file); both are TensorRT-LLM's
  // per-tensor amax / 448. The backend may hold the matrix in a layout of its own (panel_cols) and
  // keep what it needs of the scales in `scale` (the CPU: s_x · s_w per column; CUDA: {s_w, s_x}).
  float activation_scaling_factor = 0.0f, weights_scaling_factor = 0.0f;
  Weight() = default;
  Weight(const float* p) : data(p) {}  // NOLINT(google-explicit-constructor): fp32 is the default
  Weight(const void* p, DType t) : data(p), dtype(t) {}
  Weight(const void* p, const float* col_scale) : data(p), dtype(DType::kInt8), scale(col_scale) {}
  explicit operator bool() const { return data != nullptr; }
  const float* fp32() const;  // data, checked to be fp32 (throws Error otherwise)
};

// What a GEMM does with its B operand, from Weight::dtype and the quantisation fields: the one
// dispatch every backend's gemm() switches on.
enum class WeightKind {
  kFloat32,      // fp32
  kHalf,         // fp16 or bf16: A rounded to it, products summed in fp32
  kInt8Columns,  // weight-only INT8 [K, N], one scale per column (upload_weight_int8)
  kInt8Rows,     // weight-only INT8 [N, K], one scale per row, used transposed only (--int8-lm-head)
  kW8A8,         // SmoothQuant W8A8: A quantised too, int8 × int8 (upload_weight_w8a8)
  kFp8,          // FP8 E4M3: A quantised to E4M3 (upload_weight_fp8)
};
// Throws Error for a weight held in a dtype no GEMM reads.
WeightKind weight_kind(const Weight& w);
// Whether a kind's matrix is int8 or FP8 with scales beside it (none is ever transposed on a GPU).
inline bool is_quantized(WeightKind k) { return k != WeightKind::kFloat32 && k != WeightKind::kHalf; }

// One layer's K or V cache in the backend's memory and the dtype it is held in. A plain fp32
// buffer from alloc() converts implicitly.
struct KvCache {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  // kInt8 only: the layer's kv_quant_orig, TensorRT-LLM's per-tensor INT8 KV-cache scale (the QKV
  // GEMM's calibrated scale_y_quant_orig = max|QKV output| / 127; the same for
  // K and V and on every TP rank). Stored: quantize_kv(x, 1/scale); read: q · scale.
  // kFloat8E4M3: the layer's kv_cache_scaling_factor (max |K|, |V| / 448, fp8_export.h). Stored:
  // quantize_kv_fp8(x, 1/scale); read: dequantize_kv_fp8(q, scale).
  float scale = 1.0f;
  KvCache() = default;
  KvCache(float* p) : data(p) {}  // NOLINT(google-explicit-constructor): fp32 is the default
  KvCache(void* p, DType t, float s = 1.0f) : data(p), dtype(t), scale(s) {}
  float* fp32() const;   // data, checked to be fp32 (throws Error otherwise)
  int8_t* int8() const;  // data, checked to be int8 (throws Error otherwise)
  uint8_t* fp8() const;  // data, checked to be FP8 E4M3 (throws Error otherwise)
};

// Whether a KV cache of this dtype is quantised with a per-layer scale (int8, FP8).
inline bool kv_is_quantized(DType t) { return t == DType::kInt8 || t == DType::kFloat8E4M3; }

// One K or V element into an int8 cache: x · kv_orig_quant (kv_orig_quant = 1/kv_quant_orig, an
// fp32 product as on the GPU) rounded to nearest, ties to even, and saturated to [-128, 127]. That
// is TensorRT-LLM's conversion for its int8 KV cache (cuda_cast<int8_t, float>: PTX
// cvt.rni.sat.s8.f32), so -128 is reachable, unlike the ±127 of its weight files.
inline int8_t quantize_kv(float x, float kv_orig_quant) {
  const float r = std::nearbyint(x * kv_orig_quant);  // the default rounding mode: to nearest even
  return static_cast<int8_t>(r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r));
}

// One K or V element into and out of an FP8 E4M3 cache: x · kv_orig_quant (1/kv_cache_scaling_factor,
// an fp32 product as on the GPU) rounded to nearest even and saturated to ±448 (float_to_e4m3 of
// formats/fp8_e4m3.h: what TensorRT-LLM's FP8 cache stores with cvt.rn.satfinite.e4m3x2.f32); read
// back as q · scale.
inline uint8_t quantize_kv_fp8(float x, float kv_orig_quant) { return float_to_e4m3(x * kv_orig_quant); }
inline float dequantize_kv_fp8(uint8_t q, float scale) { return e4m3_to_float(q) * scale; }

// A model's rotary frequencies: its base and its rope scaling (lib/model/rope_scaling.h). A plain
// base converts implicitly (no scaling), as fp32 buffers convert to Weight.
struct RotaryFrequencies {
  double base = 10000.0;
  RopeScaling scaling;
  RotaryFrequencies(double b) : base(b) {}  // NOLINT(google-explicit-constructor): unscaled is the default
  RotaryFrequencies(double b, const RopeScaling& s) : base(b), scaling(s) {}
  // rot_dim/2 radians per position, pair by pair (rope_inv_freq).
  std::vector<double> inv_freq(int64_t rot_dim) const { return rope_inv_freq(rot_dim, base, scaling); }
};

struct AttentionShape {
  int64_t q_heads = 0;      // query heads on this rank
  int64_t kv_heads = 0;     // key/value heads on this rank (q_heads for MHA, 1 for MQA)
  int64_t head_dim = 0;
  int64_t max_seq = 0;      // slots a row can hold: its block table's length · block_size
  int64_t block_size = 0;   // tokens per KV-cache block
  float scale = 1.0f;       // applied to Q·K (1/sqrt(head_dim))
  // > 0: the cache is circular (FT's memory_len): position p lives at slot p % memory_len
  // (max_seq == memory_len) and attends to the last memory_len positions [p - memory_len + 1, p].
  int64_t memory_len = 0;
  const float* alibi_slopes = nullptr;  // host, [q_heads] for this rank's heads; nullptr: no ALiBi

  // One token's fused QKV row: [Q (q_heads·d) | K (kv_heads·d) | V (kv_heads·d)].
  int64_t qkv_width() const { return (q_heads + 2 * kv_heads) * head_dim; }
  int64_t block_elems() const { return kv_heads * block_size * head_dim; }  // one block of K or V
};

// The block tables of the rows of one attention call (host memory, like the other metadata): row
// r's block i is ids[r · stride + i]; entries beyond the slots a row holds are never read.
// stride · block_size is AttentionShape::max_seq.
struct BlockTables {
  const int32_t* ids = nullptr;
  int64_t stride = 0;
  const int32_t* row(int64_t r) const { return ids + r * stride; }
};

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

  // A host [rows, cols] matrix quantised per output column by FT's rule (quantize_int8_columns)
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
  // model's rope scaling says), taken in double.
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
};

// The arithmetic of a W8A8 GEMM C[M,N] = A[M,K] · W (SmoothQuant, TensorRT-LLM's smooth_quant_gemm
// with its quantize ops; every backend computes exactly this, fp32 output):
//  1. Activations to int8, round half to even and saturate to [-128, 127] (PTX cvt.rni.sat.s8.f32,
//     what TensorRT-LLM's cuda_cast<int8_t> does), the product taken in fp32:
//       per-tensor:  q[m][k] = sat(rint(A[m][k] · act_scale)),        alpha_row[m] = out_scale
//       per-token:   amax[m] = max_k |A[m][k]|, s = 127.f / amax[m],
//                    q[m][k] = sat(rint(A[m][k] · s)),                  alpha_row[m] = amax[m] / 127.f
//                    (amax 0: q = 0 and alpha_row = 0, as TensorRT-LLM's NaN-to-0 conversion gives).
//  2. acc[m][n] = Σ_k q[m][k] · w[k][n] in int32 (exact).
//  3. C[m][n] = float(acc) · (alpha_row[m] · alpha_col[n]) + beta · C[m][n], in fp32.
// alpha_col is what the loader gives: per-tensor scale_y_accum_quant[.col] (so with out_scale =
// scale_y_quant_orig the product is 1/(s_x·s_w)), per-token scale_w_quant_orig[.col].

// The arithmetic of an FP8 GEMM C[M,N] = A[M,K] · W (TensorRT-LLM's FP8 Linear: E4M3 × E4M3 with fp32
// accumulation; every backend computes this, fp32 output):
//  1. q_a[m][k] = E4M3(A[m][k] · (1 / s_x)): the fp32 reciprocal of activation_scaling_factor s_x,
//     an fp32 product, rounded to nearest even and saturated to ±448 (float_to_e4m3);
//  2. acc[m][n] = Σ_k q_a[m][k] · q_w[k][n] in fp32 (every product of two E4M3 values is exact in fp32);
//  3. C[m][n] = acc[m][n] · (s_x · s_w) + beta · C[m][n], the scales' product taken in fp32
//     (cuBLASLt: scale_a = s_x, scale_b = s_w, fp32 D).
// Bias and activation follow as for any GEMM.

// ALiBi slopes for all `num_heads` heads (BLOOM's): n2 = largest power of two ≤ heads;
// h < n2: 2^(-8(h+1)/n2); h ≥ n2: 2^(-4(2(h-n2)+1)/n2). A TP rank uses heads [r·n/T, (r+1)·n/T).
std::vector<float> alibi_slopes(int64_t num_heads);

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

// The host's MemAvailable, lowered to the cgroup's memory.max headroom when one is set.
size_t host_available_memory();

// Host conversion of n weight elements from `from` to `to` (each fp32, fp16 or bf16; round to
// nearest even when narrowing). Throws Error naming an unsupported dtype.
void convert_weight(const void* src, DType from, void* dst, DType to, size_t n);

// FT's weight-only quantisation of a [rows, cols] fp32 matrix, per output column n:
// scale[n] = max_k |W[k][n]| / 128 (128, not 127: FT's cutlass preprocessor), q = round(W / scale)
// half away from zero, clamped to [-128, 127]; an all-zero column gets scale 1 (its q are 0).
void quantize_int8_columns(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scale);

// The backend for `device` ("cpu"; "cuda" only when built in, else Error). weight_dtype: what the
// backend holds weight matrices in (fp32, fp16 or bf16; UsageError otherwise).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      DType weight_dtype = DType::kFloat32);

}  // namespace ftx::ops
