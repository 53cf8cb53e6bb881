// CudaBackend's attention over the paged KV cache (prefill and decode, one launcher, whose
// arguments the host checks first: attention_checks.h) and the cache's copies (copy_kv_2d,
// gather_cache_rows).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "formats/error.h"
#include "kernels/attention/attention_kernels.h"
#include "kernels/common/cuda_check.h"
#include "kernels/cuda_backend/act_kinds.h"
#include "kernels/cuda_backend/attention_checks.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/memory/memory_kernels.h"

namespace ftx::cuda {

namespace {

// The launch fields prefill and decode share (the caller adds lengths or past). tables and slopes
// are staged device copies.
AttentionLaunch attention_launch(const ops::Act& out, const ops::Act& qkv, const ops::KvCache& k_cache,
                                 const ops::KvCache& v_cache, const ops::AttentionShape& sh, const void* tables,
                                 int64_t stride, const void* slopes, int64_t items, int64_t S, int smem_optin) {
  if (k_cache.dtype != v_cache.dtype)
    throw Error(std::string("CUDA attention: K cache in ") + dtype_name(k_cache.dtype) + ", V cache in " +
                dtype_name(v_cache.dtype));
  AttentionLaunch a;
  a.act_kind = same_act_kind({out, qkv}, "attention");
  a.out = out.data;
  a.qkv = qkv.data;
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  if (ops::kv_is_quantized(k_cache.dtype)) {
    // TensorRT-LLM's INT8 and FP8 KV caches: a scale per layer (the same for K and V).
    if (!(k_cache.scale > 0.0f) || !(v_cache.scale > 0.0f))
      throw Error(std::string("CUDA attention: ") + dtype_name(k_cache.dtype) + " KV cache without a positive scale (" +
                  std::to_string(k_cache.scale) + ")");
    a.kv_kind = k_cache.dtype == DType::kInt8 ? ElemKind::kInt8 : ElemKind::kFp8E4M3;
    a.k_scale = k_cache.scale;
    a.v_scale = v_cache.scale;
  } else {
    a.kv_kind = elem_kind(k_cache.dtype);
  }
  a.block_tables = static_cast<const int32_t*>(tables);
  a.table_stride = stride;
  a.block_size = static_cast<int32_t>(sh.block_size);
  a.alibi_slopes = static_cast<const float*>(slopes);
  a.items = items;
  a.S = S;
  a.q_heads = sh.q_heads;
  a.kv_heads = sh.kv_heads;
  a.head_dim = sh.head_dim;
  a.max_seq = sh.max_seq;
  a.memory_len = sh.memory_len;
  a.scale = sh.scale;
  a.softcap = sh.softcap;
  a.window = sh.window;
  a.smem_optin = smem_optin;
  return a;
}
}  // namespace

void CudaBackend::context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                                    const ops::BlockTables& tables, const ops::KvCache& k_cache,
                                    const ops::KvCache& v_cache, const ops::AttentionShape& sh, const int32_t* past) {
  if (B <= 0 || S <= 0) return;
  // The CPU trusts these (the engine checks them); here a bad value would corrupt device memory
  // silently, so check on the host, where it is free (attention_checks.h).
  check_attention_shape(sh, tables, "context_attention");
  check_append_slots(lengths, past, B, S, sh);
  check_block_ids(tables, B, cache_blocks(k_cache, v_cache, sh), "context_attention");
  const size_t ib = static_cast<size_t>(B) * sizeof(int32_t);
  const size_t tb = static_cast<size_t>(B * tables.stride) * sizeof(int32_t);
  const size_t sb = sh.alibi_slopes ? static_cast<size_t>(sh.q_heads) * sizeof(float) : 0;
  const auto dev = stage({{lengths, ib}, {tables.ids, tb}, {sh.alibi_slopes, sb}, {past, past ? ib : 0}});
  if (replaying()) return;
  AttentionLaunch a =
      attention_launch(out, qkv, k_cache, v_cache, sh, dev[1], tables.stride, dev[2], B, S, smem_optin_);
  a.lengths = static_cast<const int32_t*>(dev[0]);
  a.past = past ? static_cast<const int32_t*>(dev[3]) : nullptr;
  invoke_attention(stream_, a);
}

void CudaBackend::decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables,
                                   const int32_t* past, const ops::KvCache& k_cache, const ops::KvCache& v_cache,
                                   const ops::AttentionShape& sh) {
  if (n <= 0) return;
  check_attention_shape(sh, tables, "decode_attention");
  check_decode_slots(past, n, sh);
  check_block_ids(tables, n, cache_blocks(k_cache, v_cache, sh), "decode_attention");
  const size_t ib = static_cast<size_t>(n) * sizeof(int32_t);
  const size_t tb = static_cast<size_t>(n * tables.stride) * sizeof(int32_t);
  const size_t sb = sh.alibi_slopes ? static_cast<size_t>(sh.q_heads) * sizeof(float) : 0;
  const auto dev = stage({{past, ib}, {tables.ids, tb}, {sh.alibi_slopes, sb}});
  if (replaying()) return;
  AttentionLaunch a =
      attention_launch(out, qkv, k_cache, v_cache, sh, dev[1], tables.stride, dev[2], n, 1, smem_optin_);
  a.past = static_cast<const int32_t*>(dev[0]);
  a.sm_count = sm_count_;
  // Split decoding's partial results (stream-ordered scratch: the next op may reuse it).
  if (const size_t w = decode_attention_workspace(a)) a.workspace = scratch(w);
  invoke_attention(stream_, a);
}

int64_t CudaBackend::cache_blocks(const ops::KvCache& k, const ops::KvCache& v, const ops::AttentionShape& sh) const {
  // The allocations' own sizes (a cache that is a view into a larger allocation: unknown, -1).
  const int64_t bk = blocks_in_cache(arena_.requested_bytes(k.data), k.dtype, sh);
  const int64_t bv = blocks_in_cache(arena_.requested_bytes(v.data), v.dtype, sh);
  return bk < 0 || bv < 0 ? -1 : std::min(bk, bv);
}

void CudaBackend::copy_kv_2d(const ops::KvCache& dst, int64_t dst_pitch, const ops::KvCache& src, int64_t src_pitch,
                             int64_t width, int64_t height) {
  if (dst.dtype != src.dtype) throw Error("CUDA copy_kv_2d: caches of different dtypes");
  if (ops::kv_is_quantized(dst.dtype) && dst.scale != src.scale)
    throw Error(std::string("CUDA copy_kv_2d: ") + dtype_name(dst.dtype) + " caches of different scales");
  if (width <= 0 || height <= 0) return;
  const size_t el = dtype_size(src.dtype);
  const size_t w = static_cast<size_t>(width) * el, dp = static_cast<size_t>(dst_pitch) * el,
               sp = static_cast<size_t>(src_pitch) * el;
  auto* d = static_cast<char*>(dst.data);
  const auto* s = static_cast<const char*>(src.data);
  // cudaMemcpy2D refuses pitches above the device's limit (2^31 - 1 bytes), and KvBlockPool::grow
  // copies a layer's whole buffer as one row of its own length: past 2 GiB that copy would fail.
  // One row, or rows packed end to end on both sides, is one plain copy; rows of larger pitches
  // than the device takes are copied one by one.
  if (height == 1 || (dp == w && sp == w)) {
    FTX_CUDA_CHECK(cudaMemcpyAsync(d, s, w * static_cast<size_t>(height), cudaMemcpyDeviceToDevice, stream_));
  } else if (dp <= max_pitch_ && sp <= max_pitch_) {
    FTX_CUDA_CHECK(cudaMemcpy2DAsync(d, dp, s, sp, w, static_cast<size_t>(height), cudaMemcpyDeviceToDevice, stream_));
  } else {
    for (int64_t r = 0; r < height; ++r)
      FTX_CUDA_CHECK(cudaMemcpyAsync(d + static_cast<size_t>(r) * dp, s + static_cast<size_t>(r) * sp, w,
                                     cudaMemcpyDeviceToDevice, stream_));
  }
}

void CudaBackend::gather_cache_rows(const ops::KvCache& kv, const int32_t* dst, const int32_t* src, int64_t n,
                                    int64_t row_elems) {
  if (n <= 0 || row_elems <= 0) return;
  // The CPU copies every source out, then writes in order (a repeated dst: the last pair wins).
  // Same result with less copying: keep each dst's last pair, drop pairs that copy a row onto
  // itself, and stage through scratch only the sources that some kept pair overwrites.
  std::unordered_map<int32_t, int64_t> last;
  for (int64_t i = 0; i < n; ++i) {
    if (dst[i] < 0 || src[i] < 0)
      throw Error("CUDA gather_cache_rows: pair " + std::to_string(i) + " has row " + std::to_string(src[i]) + " -> " +
                  std::to_string(dst[i]));
    last[dst[i]] = i;
  }
  std::vector<int32_t> to, from, staged;
  std::unordered_set<int32_t> written;
  for (int64_t i = 0; i < n; ++i)
    if (last[dst[i]] == i && src[i] != dst[i]) written.insert(dst[i]);
  std::unordered_map<int32_t, int32_t> slot_of;  // staged source row -> scratch slot
  for (int64_t i = 0; i < n; ++i) {
    if (last[dst[i]] != i || src[i] == dst[i]) continue;
    to.push_back(dst[i]);
    if (written.count(src[i])) {
      auto [it, fresh] = slot_of.emplace(src[i], static_cast<int32_t>(staged.size()));
      if (fresh) staged.push_back(src[i]);
      from.push_back(-it->second - 1);
    } else {
      from.push_back(src[i]);
    }
  }
  if (to.empty()) return;
  const auto dev = stage({{to.data(), to.size() * sizeof(int32_t)},
                          {from.data(), from.size() * sizeof(int32_t)},
                          {staged.data(), staged.size() * sizeof(int32_t)}});
  if (replaying()) return;
  const int64_t row_bytes = row_elems * static_cast<int64_t>(dtype_size(kv.dtype));
  const size_t staged_bytes = staged.size() * static_cast<size_t>(row_bytes);
  float* tmp = staged.empty() ? nullptr : scratch((staged_bytes + sizeof(float) - 1) / sizeof(float));
  if (!staged.empty())
    invoke_copy_rows(stream_, tmp, nullptr, kv.data, nullptr, static_cast<const int32_t*>(dev[2]),
                     static_cast<int64_t>(staged.size()), row_bytes);
  invoke_copy_rows(stream_, kv.data, static_cast<const int32_t*>(dev[0]), kv.data, tmp,
                   static_cast<const int32_t*>(dev[1]), static_cast<int64_t>(to.size()), row_bytes);
}
}  // namespace ftx::cuda
