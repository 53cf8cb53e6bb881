#pragma once
// The op suite's float64 references, each written from the formula lib/ops/backend.h (or the
// paper or model the op follows) states, never from ftx's kernels. Inputs are what the backend was
// given; where the interface rounds or quantises an input first (a half weight, A rounded to a
// weight's dtype, a quantised KV cache) the caller passes the rounded values, made by the
// published rounding rule (formats/dtype.h's round-to-nearest-even, formats/fp8_e4m3.h).
#include <cstdint>
#include <vector>

#include "formats/dtype.h"
#include "lib/decoding/row_sampling.h"
#include "lib/decoding/sampling.h"
#include "lib/model/blocks.h"
#include "lib/ops/backend.h"

namespace ftx::test {

// x rounded to `t` (fp32: as it is; fp16/bf16: round to nearest even) and widened back.
float round_to(DType t, float x);
std::vector<float> round_to(DType t, const std::vector<float>& x);

// C[M,N] = A[M,K] · B + beta · C0 in double, B [K,N] or (trans_b) [N,K]; scale[i] = Σ_k |a·b| +
// |beta · c0| (a dot product's error bound does not shrink with cancellation).
struct GemmRef {
  std::vector<float> c;
  std::vector<double> scale;
};
GemmRef gemm_ref(int64_t M, int64_t N, int64_t K, const std::vector<double>& a, const std::vector<double>& b,
                 bool trans_b, const std::vector<float>& c0, float beta);
std::vector<double> widen(const std::vector<float>& x);

// FT's weight-only int8 rule per column of a [rows, cols] matrix (FasterTransformer's cutlass
// preprocessor): scale = max|w| / 128 (1 for an all-zero column), q = round half away from zero of
// w / scale, clamped to [-128, 127]; returns the dequantised q · scale. `per_row`: the rule over
// each row instead (--int8-lm-head's [N, K] table).
std::vector<double> int8_weight_only_values(const std::vector<float>& w, int64_t rows, int64_t cols, bool per_row);

// Normalisation and elementwise ops (torch's formulas, biased variance, in double). `scale` is the
// magnitude each output is compared against: |gamma·z| + |beta|.
struct NormRef {
  std::vector<float> out;
  std::vector<double> scale;
};
NormRef layer_norm_ref(const std::vector<float>& x, const std::vector<float>& gamma, const float* beta, int64_t rows,
                       int64_t H, double eps);
NormRef rms_norm_ref(const std::vector<float>& x, const std::vector<float>& gamma, int64_t rows, int64_t H, double eps);
// act(x) (GELU with erf, GELU's tanh form, ReLU, SiLU, squared ReLU; SwiGLU and GeGLU apply SiLU and
// GELU to x, the caller multiplies by the gate).
double activation_ref(Nonlinearity f, double x);

// fairseq's SinusoidalPositionalEmbedding row for `pos`: [sin(pos·f_i) | cos(pos·f_i)], f_i =
// exp(-i·ln(10000)/(H/2 - 1)), i < H/2; an odd last column 0.
std::vector<double> sinusoidal_row(int64_t pos, int64_t H);

// How a KV cache of dtype t (with its scale) holds an element: what it stores (the value for
// fp32/fp16/bf16 rounded to t, the code for int8 and FP8, as Buffers::kv_values reads them back)
// and what an attention reads from that (q · scale for int8 and FP8).
struct KvFormat {
  DType dtype = DType::kFloat32;
  float scale = 1.0f;
  float store(float x) const;  // int8: sat(rint(x · (1/scale))), the product in fp32; FP8: E4M3(x · (1/scale))
  double load(float stored) const;
};

// A paged K or V cache as its elements' stored values (KvFormat::store), [blocks, kv_heads,
// block_size, head_dim] (lib/ops/backend.h's layout).
struct RefCache {
  std::vector<float> v;
  KvFormat format;
};

// context_attention and decode_attention by lib/ops/backend.h's contract: K and V of each token
// stored at its slot (position % memory_len when circular), then per query head softmax(cap(scale ·
// q·k) + slope · (key position - query position)) over the slots the query sees (cap(s) = softcap ·
// tanh(s / softcap) when AttentionShape::softcap is set; behind a sliding window none), weights times V;
// padded query positions 0. Updates the caches; returns out and, per element, what it is compared
// against: Σ p·|v|·(1 + |score|), |score| the score's magnitude (scale · Σ|q·k| + |alibi|), since an
// fp32 score is off by a few of its ulps, which moves its softmax weight relatively as much.
struct AttentionRef {
  std::vector<float> out;
  std::vector<double> scale;
};
AttentionRef context_attention_ref(const std::vector<float>& qkv, int64_t B, int64_t S, const int32_t* lengths,
                                   const ops::BlockTables& tables, RefCache& k, RefCache& v,
                                   const ops::AttentionShape& shape, const int32_t* past);
AttentionRef decode_attention_ref(const std::vector<float>& qkv, int64_t n, const ops::BlockTables& tables,
                                  const int32_t* past, RefCache& k, RefCache& v, const ops::AttentionShape& shape);

// lib/decoding/row_sampling.h's steps 1-5 for one row of `vocab` logits (the processing in fp32 as
// stated there, the draw and log probs in double). `ambiguous`: u·p·total lies within rounding of
// a cumulative boundary, where the token after `token` is as right.
struct SampleRef {
  decoding::SampledToken t;
  bool all_banned = false;  // every logit -inf after processing: no draw means anything
  bool ambiguous = false;
};
SampleRef sample_ref(const float* logits, int64_t vocab, const decoding::RowSampling& r, const int32_t* ids);

}  // namespace ftx::test
