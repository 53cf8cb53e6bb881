#pragma once
// Attention room: prefill and decode attention over the KV cache (attention_kernels.cu says how).
// Conventions of every launcher (all rooms): pointers are device pointers (index arrays included:
// the backend stages them first); a launcher enqueues on `stream`, returns at once, and checks the
// launch itself (not its execution); n == 0 / rows == 0 launch nothing. Semantics are those of the
// Backend method named in the comment (lib/ops/backend.h) and of its CPU twin (lib/cpu/), which
// tests/unit/cuda_backend_test.cc compares them against (label gpu). Launchers are named
// invoke_<what>, after FasterTransformer's invokeXxx, in this code base's snake case.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/elem_kind.h"

namespace ftx::cuda {

// Attention over the paged KV cache: per layer K and V each [blocks, kv_heads, block_size, d], item
// b's slot s in block block_tables[b · table_stride + s / block_size] at offset s % block_size (see
// lib/ops/backend.h). Item b has `nvalid` query tokens at qkv rows b·S + j (j < S; j >= nvalid are
// padding and get zeros), at slots base_pos + j, stored into its blocks at those slots and
// attending to slots [0, base_pos + j]. Prefill: S = padded width, nvalid = lengths[b], base_pos
// = 0. Decode: S = 1, nvalid = 1, base_pos = past[b].
struct AttentionLaunch {
  void* out = nullptr;           // [items·S, q_heads·d], in act_kind
  const void* qkv = nullptr;     // [items·S, (q_heads + 2 kv_heads)·d], in act_kind
  ElemKind act_kind = ElemKind::kFp32;  // the activations': fp32, fp16 or bf16
  void* k_cache = nullptr;       // elements of kv_kind
  void* v_cache = nullptr;
  ElemKind kv_kind = ElemKind::kFp32;
  // kInt8 and kFp8E4M3 only: the scales of K and V (ops::KvCache::scale); stored q = sat(rint(x /
  // scale)) or E4M3(x / scale), read q · scale.
  float k_scale = 1.0f, v_scale = 1.0f;
  const int32_t* block_tables = nullptr;  // [items, table_stride]
  int64_t table_stride = 0;
  int32_t block_size = 0;               // slots per block
  const int32_t* lengths = nullptr;     // [items] prefill/append (nvalid), or null for decode
  const int32_t* past = nullptr;        // [items] first slot (decode; an append), or null: 0
  const float* alibi_slopes = nullptr;  // [q_heads] or null
  int64_t items = 0, S = 1;
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t max_seq = 0;     // slots a row can hold (table_stride · block_size)
  int64_t memory_len = 0;  // > 0: circular cache, slot p at p % memory_len (decode only wraps)
  float scale = 1.0f;
  float softcap = 0.0f;  // > 0: scores s = softcap · tanh(s / softcap) after the scale, before ALiBi
  int64_t window = 0;    // > 0: the query at position p sees keys at positions p - window + 1 .. p only
  int smem_optin = 48 * 1024;  // the device's opt-in shared memory per block (bytes)
  // Decode only (flash-decoding): with fewer (row, head) pairs than the device has SMs, each pair's
  // keys are split over several blocks, whose partial softmax results are merged by a second
  // kernel. sm_count: the device's; workspace: decode_attention_workspace(*this) floats of device
  // memory for the partials (null when that is 0).
  int sm_count = 0;
  float* workspace = nullptr;
};
// Floats of AttentionLaunch::workspace a decode launch needs (0: no split). Depends on items,
// q_heads, head_dim, max_seq, sm_count and smem_optin only, never on the rows' lengths, so every
// decode step of a batch launches the same kernels (a recorded CUDA graph replays them).
size_t decode_attention_workspace(const AttentionLaunch& a);
// Largest head_dim the attention kernel takes.
constexpr int64_t kMaxAttentionHeadDim = 256;
// Backend::context_attention and decode_attention.
void invoke_attention(cudaStream_t stream, const AttentionLaunch& a);

}  // namespace ftx::cuda
