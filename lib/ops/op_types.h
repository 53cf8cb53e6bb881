#pragma once
// The vocabulary of the op seam (lib/ops/backend.h): the operands its ops take besides activations
// (lib/ops/act.h): weights and the kind of GEMM each is, KV caches and how their int8 and FP8
// elements are stored, the attention's shape and block tables, the rotary frequencies, and the
// arithmetic every backend's quantised GEMMs compute (at the end of this file).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "formats/dtype.h"
#include "formats/fp8_e4m3.h"
#include "lib/model/blocks.h"
#include "lib/model/rope_scaling.h"

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
  // keep what it needs of the scales in `scale` (the CPU: s_x · s_w per column; CUDA: s_w, s_x 16 bytes apart).
  float activation_scaling_factor = 0.0f, weights_scaling_factor = 0.0f;
  // INT4 weight-only (dtype kUInt8 with int4 set; Backend::upload_weight_int4 of an Int4Matrix,
  // lib/ops/int4_matrix.h, whose comment is the arithmetic): `data` holds the 4-bit values and `scale`
  // the fp32 group scales, both in the backend's own layout; int4_zeros the zero points (null:
  // symmetric); int4_aux whatever else the backend's kernel needs (group boundaries, a row order
  // for act-order groups); input_dtype as for weight-only INT8. Never transposed.
  bool int4 = false;
  int64_t int4_group_size = 0;
  const uint8_t* int4_zeros = nullptr;
  const void* int4_aux = nullptr;
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
  kInt4Groups,   // INT4 weight-only [K, N] in groups along K (upload_weight_int4)
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

// A model's rotary frequencies: its base and its rope scaling (lib/model/rope_scaling.h), and the
// magnitude cos and sin are multiplied by (yarn's and longrope's attention factor, 1 otherwise:
// it scales the rotated dims only). A plain base converts implicitly (no scaling), as fp32 buffers
// convert to Weight.
struct RotaryFrequencies {
  double base = 10000.0;
  RopeScaling scaling;
  double magnitude = 1.0;
  RotaryFrequencies(double b) : base(b) {}  // NOLINT(google-explicit-constructor): unscaled is the default
  RotaryFrequencies(double b, const RopeScaling& s) : base(b), scaling(s), magnitude(rope_attention_factor(s)) {}
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
  // > 0: each score is capped as s = softcap · tanh(s / softcap) after the scale, before ALiBi and the
  // mask (Gemma 2's attn_logit_softcapping). 0: off.
  float softcap = 0.0f;
  // > 0: a sliding window: the query at position p sees keys at positions p - window + 1 .. p only,
  // `window` keys with its own (transformers' sliding_window_overlay in masking_utils keeps
  // kv_idx > q_idx - sliding_window). With a circular cache, both limits hold. 0: off. The slots
  // behind the window keep their blocks (nothing is freed here).
  int64_t window = 0;

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

// One layer of experts as one rank holds it (Backend::moe_ffn): the router, whole on every rank,
// and the experts' FFNs, either
//  * every expert sliced as a dense FFN is over the ranks (FT's layout): fc (and gate, for a gated
//    activation) [hidden, inter] of this rank's columns, proj [inter, hidden] of its rows; or
//  * whole experts on each rank (expert parallelism, docs/parallelism.md): the rank holds experts
//    [expert_begin, expert_begin + expert_count) whole and computes only those;
// either way the op's output is a partial sum the engine's all-reduce completes. `fc`, `gate` and
// `proj` point to the rank's experts' weights (expert e's at index e - expert_begin), each a
// floating-point or weight-only INT8 matrix (gemm's arithmetic for its kind).
struct MoeLayer {
  int64_t hidden = 0, inter = 0, experts = 0, top_k = 0;
  // The experts this rank holds; expert_count 0: all of them (expert_begin 0).
  int64_t expert_begin = 0, expert_count = 0;
  MoeRouting routing = MoeRouting::kSoftmaxTopKRenorm;
  Activation act;
  Weight router;                 // [hidden, experts], every expert's column on every rank
  const Weight* fc = nullptr;    // the activated projection (Mixtral's w1)
  const Weight* gate = nullptr;  // gated activations: the multiplied one (w3); else null
  const Weight* proj = nullptr;  // the output projection (w2)
  // Expert biases (FT GPT-MoE's, Megatron-DeepSpeed's experts), null without: fc's [experts, inter]
  // (expert e's this rank's columns at e · inter), proj's [experts, hidden], which the caller passes
  // on one rank only, since each row adds it weighted by its choice's weight into the partial sum.
  const float* fc_bias = nullptr;
  const float* proj_bias = nullptr;
  // A shared expert (Qwen2-MoE's; shared_inter 0: none): one more FFN with the routed experts'
  // activation, run on every row and sliced over the ranks as they are (shared_fc, shared_gate
  // [hidden, shared_inter] of this rank's columns, shared_proj [shared_inter, hidden] of its rows),
  // its output weighed by sigmoid(in · shared_weigher) and added to the routed sum.
  int64_t shared_inter = 0;
  Weight shared_fc, shared_gate, shared_proj;  // shared_gate: gated activations only
  Weight shared_weigher;                       // [hidden, 1], whole on every rank; empty: weight 1
  int64_t local_experts() const { return expert_count > 0 ? expert_count : experts; }
  bool holds(int64_t e) const { return e >= expert_begin && e < expert_begin + local_experts(); }
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

}  // namespace ftx::ops
