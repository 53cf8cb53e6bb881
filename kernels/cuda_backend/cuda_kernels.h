#pragma once
// Host-side launchers of the CUDA backend's kernels (cuda_kernels.cu, cuda_attention.cu). All
// pointers are device pointers (index arrays included: the backend stages them first); every
// launcher enqueues on `stream`, returns at once, and checks the launch itself (not its execution).
// Semantics are those of the same-named Backend methods (lib/ops/backend.h) and of the CPU
// reference (lib/cpu/); a caller passes n == 0 / rows == 0 freely (nothing is launched).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ftx::cuda {

// The dtypes weights and the KV cache may be held in (the .cu files do not see formats/dtype.h).
enum class ElemKind { kFp32, kFp16, kBf16 };

void launch_fill(cudaStream_t stream, float* dst, float value, size_t n);
// dst[i] = src[i] rounded to nearest even in fp16 or bf16 (kind; a GEMM's activation operand).
void launch_cast(cudaStream_t stream, void* dst, ElemKind kind, const float* src, size_t n);
// dst[k][n] = q[k][n] · scale[n] for a [K, N] int8 matrix, stored in `kind` (weight-only INT8:
// the GEMM then reads an ordinary fp32/fp16/bf16 operand).
void launch_dequantize_int8_columns(cudaStream_t stream, void* dst, ElemKind kind, const int8_t* q,
                                    const float* scale, int64_t K, int64_t N);
// x *= s (s == 0 writes zeros, so NaN garbage in x does not survive, as BLAS with beta = 0).
void launch_scale(cudaStream_t stream, float* x, float s, size_t n);

// x += y + bias (each may be null); then, when gamma is set, out = LN(x) (out may equal x).
// x may be a const input when y and bias are both null (it is not written then).
void launch_residual_layer_norm(cudaStream_t stream, float* x, const float* y, const float* bias,
                                const float* gamma, const float* beta, float* out, int64_t rows, int64_t H,
                                float eps);
void launch_add_bias(cudaStream_t stream, float* x, const float* bias, int64_t rows, int64_t N);
// act is the int value of ftx::Activation.
void launch_bias_activation(cudaStream_t stream, float* x, const float* bias, const float* gate,
                            const float* gate_bias, int64_t rows, int64_t N, int act);
// table: 0 none, 1 learned, 2 sinusoidal (ops::PositionTable order). wte is held in wte_kind.
void launch_embedding(cudaStream_t stream, float* out, const void* wte, ElemKind wte_kind, const float* wpe,
                      int table, int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows,
                      int64_t H, float scale);
// interleaved: GPT-J pairs (2i, 2i+1); else NeoX pairs (i, i + rot_dim/2).
void launch_rotary(cudaStream_t stream, float* qkv, int64_t rows, int64_t stride, const int32_t* positions,
                   int64_t heads, int64_t head_dim, int64_t rot_dim, bool interleaved, double base);

// Row copies of `row_bytes` bytes (even), pair i: row to_idx ? to_idx[i] : i of to_base := source,
// where the source is row from_idx[i] of from_a when from_idx[i] >= 0, else row -from_idx[i] - 1 of
// from_b. The caller guarantees no pair reads a row another pair of the same launch writes.
void launch_copy_rows(cudaStream_t stream, void* to_base, const int32_t* to_idx, const void* from_a,
                      const void* from_b, const int32_t* from_idx, int64_t pairs, int64_t row_bytes);

// Attention over the KV cache [cache_rows, kv_heads, max_seq, d] (see lib/ops/backend.h).
// Item b has `nvalid` query tokens at qkv rows b·S + j (j < S; j >= nvalid are padding and get
// zeros), at positions base_pos + j, stored into cache row cache_rows[b] at slot base_pos + j and
// attending to slots [0, base_pos + j]. Prefill: S = padded width, nvalid = lengths[b], base_pos
// = 0. Decode: S = 1, nvalid = 1, base_pos = past[b].
struct AttentionLaunch {
  float* out = nullptr;          // [items·S, q_heads·d]
  const float* qkv = nullptr;    // [items·S, (q_heads + 2 kv_heads)·d]
  void* k_cache = nullptr;       // elements of kv_kind
  void* v_cache = nullptr;
  ElemKind kv_kind = ElemKind::kFp32;
  const int32_t* cache_rows = nullptr;  // [items]
  const int32_t* lengths = nullptr;     // [items] prefill/append (nvalid), or null for decode
  const int32_t* past = nullptr;        // [items] first position (decode; an append), or null: 0
  const float* alibi_slopes = nullptr;  // [q_heads] or null
  int64_t items = 0, S = 1;
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0, max_seq = 0;
  int64_t memory_len = 0;  // > 0: circular cache, position p at slot p % memory_len (decode only wraps)
  float scale = 1.0f;
  int smem_optin = 48 * 1024;  // the device's opt-in shared memory per block (bytes)
};
// Largest head_dim the attention kernel takes.
constexpr int64_t kMaxAttentionHeadDim = 256;
void launch_attention(cudaStream_t stream, const AttentionLaunch& a);

}  // namespace ftx::cuda
