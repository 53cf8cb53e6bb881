// CUDA attention over the paged KV cache: prefill (causal, right-padded batch) and one-token decode
// share one kernel, as the CPU's two paths share attend_one (lib/cpu/cpu_attention.cc). K and V are
// first stored into the cache's blocks [blocks, kv_heads, block_size, d], then read back from them,
// so prefill and decode see the same numbers for the same history. Keys are read in tiles of 32
// slots; each slot's element offset comes from the item's block table (slot_offset), worked out
// once per tile, so any block size works (the engine's default, 64, keeps a tile in one block).
//
// Kernel shape (straightforward, correct first): one block per (item, query head, tile of QT
// consecutive queries); each warp owns QPW queries. Keys stream through shared memory in tiles of
// 32 slots (K padded to d+1 columns so lane j reading row j hits distinct banks); lane j scores
// key j against the warp's query, then an online softmax (running max m, sum l, rescaled
// accumulator) folds the tile into per-lane output chunks (dims lane, lane+32, ...). Prefill uses
// 4 warps × 4 queries.
//
// Decode has one query per (row, head), so the block's warps split the keys instead: warp w folds
// key tiles w, w + W, w + 2W, ... into its own online softmax, staged in its own shared-memory
// tile (so warps never wait for each other), and the block then merges the W partial results
// (m, l, acc) as flash-decoding does across blocks. W is up to 8, fewer when the cache is short or
// shared memory is scarce; any W gives the same result up to summation order. When the rows and
// heads are fewer than the SMs, the keys are split across blocks too and a second kernel merges
// the blocks' partial results the same way.
//
// The cache holds fp32, fp16 or bf16 (AttentionLaunch::kv_kind): K and V are rounded once as they
// are stored and widened to fp32 as they are staged into shared memory; all arithmetic is fp32.
// Or int8 (--int8-kv-cache, TensorRT-LLM's INT8 KV cache): stored as x · (1/scale) rounded to
// nearest even and saturated to [-128, 127] (PTX cvt.rni.sat.s8.f32, TensorRT-LLM's
// cuda_cast<int8_t, float>; the CPU twin is ops::quantize_kv), staged as q · scale (KvElem).
// Or FP8 E4M3 (--fp8-kv-cache, TensorRT-LLM's FP8 KV cache): stored as E4M3(x · (1/scale)), rounded
// to nearest even and saturated to ±448 (__nv_fp8_e4m3's conversion, cvt.rn.satfinite; the CPU twin
// is ops::quantize_kv_fp8), staged as e4m3 · scale.
// Activations (the fused QKV rows read, the output written) are fp32, fp16 or bf16
// (AttentionLaunch::act_kind): Q is widened as it is staged, each output rounded once as it is stored.
// Decode with few (row, head) pairs splits each pair's keys over several blocks as well
// (flash-decoding: decode_split), merged by merge_decode_splits_kernel.
// Not done: tensor cores; under MQA/GQA each query head's block reads its KV head's keys itself.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/attention/attention_kernels.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"

namespace ftx::cuda {

namespace {

constexpr int kKeyTile = 32;  // one key per lane
constexpr int kMaxChunks = static_cast<int>(kMaxAttentionHeadDim / 32);

// How a cache element of type T is stored from and read back into fp32. `scale` is the cache's
// kv_quant_orig (int8 only; 1 and unused for the floating-point kinds), `inv` its fp32 reciprocal.
template <typename T>
struct KvElem {
  __device__ static T store(float x, float /*inv*/) { return from_float<T>(x); }
  __device__ static float load(T v, float /*scale*/) { return to_float(v); }
};
template <>
struct KvElem<int8_t> {
  __device__ static int8_t store(float x, float inv) {
    int r;
    asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(x * inv));
    return static_cast<int8_t>(r);
  }
  __device__ static float load(int8_t v, float scale) { return static_cast<float>(v) * scale; }
};
template <>
struct KvElem<__nv_fp8_e4m3> {
  __device__ static __nv_fp8_e4m3 store(float x, float inv) { return __nv_fp8_e4m3(x * inv); }  // satfinite, RN
  __device__ static float load(__nv_fp8_e4m3 v, float scale) { return static_cast<float>(v) * scale; }
};

// Element offset in the cache of slot s of item b's KV head h (the block table's indexing only;
// KvElem says how an element is stored and read).
__device__ __forceinline__ int64_t slot_offset(const AttentionLaunch& a, int64_t b, int64_t h, int64_t s) {
  const int32_t bs = a.block_size;
  const int32_t slot = static_cast<int32_t>(s);
  const int64_t block = a.block_tables[b * a.table_stride + slot / bs];
  return ((block * a.kv_heads + h) * bs + slot % bs) * a.head_dim;
}

// A key's score from its dot product with the query: scale·dot, capped when the shape says
// (AttentionLaunch::softcap), plus ALiBi by position. Without a cap, the one expression it always was.
__device__ __forceinline__ float attention_score(float dot, const AttentionLaunch& a, float slope, int64_t kpos,
                                                 int64_t qpos) {
  if (a.softcap > 0.0f) {
    const float s = dot * a.scale;
    return a.softcap * tanhf(s / a.softcap) + slope * static_cast<float>(kpos - qpos);
  }
  return dot * a.scale + slope * static_cast<float>(kpos - qpos);
}

// Whether a key at kpos lies in the sliding window of a query at qpos (AttentionLaunch::window:
// transformers' sliding_window_overlay keeps kv_idx > q_idx - sliding_window); no window: all do.
__device__ __forceinline__ bool in_window(const AttentionLaunch& a, int64_t kpos, int64_t qpos) {
  return a.window <= 0 || kpos > qpos - a.window;
}

// Item b's token j (j < nvalid) -> its slot base_pos + j.
template <typename T>
__global__ void store_kv_kernel(const AttentionLaunch a) {
  const int64_t d = a.head_dim, width = (a.q_heads + 2 * a.kv_heads) * d;
  const size_t total = static_cast<size_t>(a.items) * a.S * a.kv_heads * d;
  for (size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x; idx < total;
       idx += size_t(gridDim.x) * blockDim.x) {
    const int64_t i = static_cast<int64_t>(idx % d);
    size_t rest = idx / d;
    const int64_t h = static_cast<int64_t>(rest % a.kv_heads);
    rest /= a.kv_heads;
    const int64_t j = static_cast<int64_t>(rest % a.S);
    const int64_t b = static_cast<int64_t>(rest / a.S);
    const int64_t nvalid = a.lengths ? a.lengths[b] : 1;
    if (j >= nvalid) continue;
    int64_t slot = (a.past ? a.past[b] : 0) + j;
    if (a.memory_len > 0) slot %= a.memory_len;
    const int64_t k = (b * a.S + j) * width + a.q_heads * d + h * d + i;
    const int64_t dst = slot_offset(a, b, h, slot) + i;
    // kv_orig_quant as TensorRT-LLM uses it: the fp32 reciprocal of the stored scale.
    static_cast<T*>(a.k_cache)[dst] = KvElem<T>::store(load_act(a.qkv, a.act_kind, k), 1.0f / a.k_scale);
    static_cast<T*>(a.v_cache)[dst] =  // V follows all K heads
        KvElem<T>::store(load_act(a.qkv, a.act_kind, k + a.kv_heads * d), 1.0f / a.v_scale);
  }
}

// Folds one tile of nk keys into a warp's online softmax for one query. Lane j holds key j's
// score (-inf when masked; a tile whose keys are all masked adds nothing), m and l are the running
// maximum and sum, acc the lane's output dims lane + 32c, vs the tile's V rows [kKeyTile][d].
__device__ __forceinline__ void fold_key_tile(float score, int nk, const float* vs, int d, int lane, float& m,
                                              float& l, float (&acc)[kMaxChunks]) {
  float tmax = score;
  for (int o = 16; o > 0; o >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(kFullWarpMask, tmax, o));
  if (tmax == -INFINITY) return;  // all masked (a circular cache's slots behind a window); warp-uniform
  const float mnew = fmaxf(m, tmax);
  const float corr = expf(m - mnew);  // 0 on the first tile (m = -inf)
  const float p = expf(score - mnew);  // 0 for masked lanes
  float psum = p;
  for (int o = 16; o > 0; o >>= 1) psum += __shfl_xor_sync(kFullWarpMask, psum, o);
  l = l * corr + psum;
  m = mnew;
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) acc[c] *= corr;
  for (int j = 0; j < nk; ++j) {
    const float pj = __shfl_sync(kFullWarpMask, p, j);
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
      const int i = lane + 32 * c;
      if (i < d) acc[c] += pj * vs[j * d + i];
    }
  }
}

template <int QPW, typename T>
__global__ void attention_kernel(const AttentionLaunch a, int64_t tiles) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(a.head_dim), dp = d + 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int QT = static_cast<int>(blockDim.x / 32) * QPW;
  float* ks = smem;                // [kKeyTile][d + 1]
  float* vs = ks + kKeyTile * dp;  // [kKeyTile][d]
  float* qs = vs + kKeyTile * d;   // [QT][d]

  const int64_t b = blockIdx.x / tiles, t0 = (blockIdx.x % tiles) * QT;
  const int64_t h = blockIdx.y, S = a.S;
  const int64_t nvalid = min(a.lengths ? static_cast<int64_t>(a.lengths[b]) : int64_t(1), S);
  const int64_t base_pos = a.past ? a.past[b] : 0;
  const int64_t width = (a.q_heads + 2 * a.kv_heads) * d, out_width = a.q_heads * d;

  for (int idx = threadIdx.x; idx < QT * d; idx += blockDim.x) {
    const int64_t t = t0 + idx / d;
    qs[idx] = t < nvalid ? load_act(a.qkv, a.act_kind, (b * S + t) * width + h * d + idx % d) : 0.0f;
  }
  // Valid queries of this tile: t in [t0, t_end); the last one attends to slots [0, base_pos + t_end - 1].
  const int64_t t_end = min(t0 + QT, nvalid);
  const int64_t nkeys = t_end > t0 ? base_pos + t_end : 0;
  // Behind a sliding window the tile's first query sees keys from base_pos + t0 - window + 1 on:
  // start at the key tile that holds it (tiles stay aligned to slot multiples of 32).
  const int64_t first_key =
      a.window > 0 ? max(int64_t(0), base_pos + t0 - a.window + 1) / kKeyTile * kKeyTile : int64_t(0);
  const int64_t group = a.q_heads / a.kv_heads;  // query heads per KV head (MQA: all)
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const float slope = a.alibi_slopes ? a.alibi_slopes[h] : 0.0f;
  __shared__ int64_t key_off[kKeyTile];  // the tile's slots, as element offsets

  float m[QPW], l[QPW], acc[QPW][kMaxChunks];
#pragma unroll
  for (int q = 0; q < QPW; ++q) {
    m[q] = -INFINITY;
    l[q] = 0.0f;
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) acc[q][c] = 0.0f;
  }

  for (int64_t k0 = first_key; k0 < nkeys; k0 += kKeyTile) {
    const int nk = static_cast<int>(min(int64_t(kKeyTile), nkeys - k0));
    __syncthreads();  // previous tile consumed; on the first pass, qs is written
    if (threadIdx.x < nk) key_off[threadIdx.x] = slot_offset(a, b, h / group, k0 + threadIdx.x);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kKeyTile * d; idx += blockDim.x) {
      const int j = idx / d, i = idx % d;
      float kv = 0.0f, vv = 0.0f;
      if (j < nk) {
        kv = KvElem<T>::load(kc[key_off[j] + i], a.k_scale);
        vv = KvElem<T>::load(vc[key_off[j] + i], a.v_scale);
      }
      ks[j * dp + i] = kv;
      vs[j * d + i] = vv;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < QPW; ++q) {
      const int64_t t = t0 + warp * QPW + q;
      const int64_t qpos = base_pos + t;
      // The conditions are the same for the whole warp, so the shuffles below see every lane. A tile
      // wholly behind the query's window is skipped; any other has an unmasked key.
      if (t >= t_end || k0 > qpos || !in_window(a, k0 + nk - 1, qpos)) continue;
      const int64_t s = k0 + lane;
      float score = -INFINITY;
      if (lane < nk && s <= qpos && in_window(a, s, qpos)) {
        const float* qq = qs + (warp * QPW + q) * d;
        const float* kk = ks + lane * dp;
        float dot = 0.0f;
        for (int i = 0; i < d; ++i) dot += qq[i] * kk[i];
        score = attention_score(dot, a, slope, s, qpos);
      }
      fold_key_tile(score, nk, vs, d, lane, m[q], l[q], acc[q]);
    }
  }

#pragma unroll
  for (int q = 0; q < QPW; ++q) {
    const int64_t t = t0 + warp * QPW + q;
    if (t >= S) continue;
    const int64_t o = (b * S + t) * out_width + h * d;
    const bool valid = t < t_end;  // padded query positions get zeros
    const float inv = valid ? 1.0f / l[q] : 0.0f;
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
      const int i = lane + 32 * c;
      if (i < d) store_act(a.out, a.act_kind, o + i, valid ? acc[q][c] * inv : 0.0f);
    }
  }
}

// One block per (row, query head, split), blockDim.x = 32·W. Shared memory: q [d], then per warp K
// tile [32][d+1] and V tile [32][d], then the merge area m [W], l [W], acc [W][d]. Split z covers
// slots [z·chunk, (z+1)·chunk) of the row's keys; with one split the block writes the output,
// else its merged (m, l, acc) into the workspace for merge_decode_splits_kernel.
template <typename T>
__global__ void decode_attention_kernel(const AttentionLaunch a, int64_t chunk) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(a.head_dim), dp = d + 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, W = static_cast<int>(blockDim.x / 32);
  float* qs = smem;
  float* ks = qs + d + static_cast<size_t>(warp) * kKeyTile * (dp + d);
  float* vs = ks + kKeyTile * dp;
  float* red_m = qs + d + static_cast<size_t>(W) * kKeyTile * (dp + d);
  float* red_l = red_m + W;
  float* red_acc = red_l + W;

  const int64_t b = blockIdx.x, h = blockIdx.y;
  // A circular cache (memory_len) holds the last memory_len positions; slot s holds position
  // qpos - ((qpos - s) mod memory_len), which is what ALiBi needs.
  const int64_t ring = a.memory_len;
  const int64_t qpos = a.past[b], nkeys = ring > 0 ? min(qpos + 1, ring) : qpos + 1;
  const int64_t width = (a.q_heads + 2 * a.kv_heads) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) qs[i] = load_act(a.qkv, a.act_kind, b * width + h * d + i);
  const int64_t group = a.q_heads / a.kv_heads;
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const float slope = a.alibi_slopes ? a.alibi_slopes[h] : 0.0f;
  __syncthreads();  // qs written

  // A linear cache skips the slots behind a sliding window; a circular one masks them by position
  // (a tile of only such slots is skipped in fold_key_tile).
  const int64_t window_start = a.window > 0 && ring == 0 ? max(int64_t(0), qpos - a.window + 1) : int64_t(0);
  const int64_t first = max(static_cast<int64_t>(blockIdx.z) * chunk, window_start),
                end = min(nkeys, static_cast<int64_t>(blockIdx.z + 1) * chunk);
  float m = -INFINITY, l = 0.0f, acc[kMaxChunks];
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) acc[c] = 0.0f;
  for (int64_t k0 = first + static_cast<int64_t>(warp) * kKeyTile; k0 < end; k0 += static_cast<int64_t>(W) * kKeyTile) {
    const int nk = static_cast<int>(min(int64_t(kKeyTile), end - k0));
    // Lane j works out key j's offset; every lane then reads the ones it loads from its owner.
    const long long my_off = lane < nk ? slot_offset(a, b, h / group, k0 + lane) : 0;
    __syncwarp();  // the warp's previous tile is consumed
    for (int idx = lane; idx < kKeyTile * d; idx += 32) {  // the same trip count on every lane
      const int j = idx / d, i = idx % d;
      const int64_t off = __shfl_sync(kFullWarpMask, my_off, j) + i;
      ks[j * dp + i] = j < nk ? KvElem<T>::load(kc[off], a.k_scale) : 0.0f;
      vs[j * d + i] = j < nk ? KvElem<T>::load(vc[off], a.v_scale) : 0.0f;
    }
    __syncwarp();
    const int64_t s = k0 + lane;
    float score = -INFINITY;
    const int64_t kpos = ring > 0 ? qpos - ((qpos - s) % ring + ring) % ring : s;
    if (lane < nk && in_window(a, kpos, qpos)) {
      const float* kk = ks + lane * dp;
      float dot = 0.0f;
      for (int i = 0; i < d; ++i) dot += qs[i] * kk[i];
      score = attention_score(dot, a, slope, kpos, qpos);
    }
    fold_key_tile(score, nk, vs, d, lane, m, l, acc);  // k0 < end <= nkeys: lane 0's key exists (a window may mask it)
  }

  // Merge the warps: out = Σ_w e^(m_w - M)·acc_w / Σ_w e^(m_w - M)·l_w; a warp that had no tile
  // (m_w = -inf) adds nothing. Without splits some warp had the query's own key; a split beyond the
  // row's keys (or behind its window) has none at all and leaves M = -inf, L = 0 for the merge
  // kernel to skip.
  if (lane == 0) {
    red_m[warp] = m;
    red_l[warp] = l;
  }
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {
    const int i = lane + 32 * c;
    if (i < d) red_acc[warp * d + i] = acc[c];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < W; ++w) M = fmaxf(M, red_m[w]);
  float L = 0.0f;
  for (int w = 0; w < W; ++w)
    if (red_m[w] != -INFINITY) L += expf(red_m[w] - M) * red_l[w];
  const bool split = gridDim.z > 1;
  float* part = split ? a.workspace + ((b * a.q_heads + h) * gridDim.z + blockIdx.z) * (d + 2) : nullptr;
  if (split && threadIdx.x == 0) {
    part[0] = M;
    part[1] = L;
  }
  const float inv = split ? 1.0f : 1.0f / L;
  const int64_t o = b * a.q_heads * d + h * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < W; ++w)
      if (red_m[w] != -INFINITY) v += expf(red_m[w] - M) * red_acc[w * d + i];
    if (split)
      part[2 + i] = v;
    else
      store_act(a.out, a.act_kind, o + i, v * inv);
  }
}

// Flash-decoding's second step, one block per (row, query head): out = Σ_z e^(m_z - M)·acc_z /
// Σ_z e^(m_z - M)·l_z over the splits that had keys (the one holding the query's own key always has).
__global__ void merge_decode_splits_kernel(const AttentionLaunch a, int splits) {
  const int d = static_cast<int>(a.head_dim);
  const int64_t b = blockIdx.x, h = blockIdx.y;
  const float* parts = a.workspace + (b * a.q_heads + h) * splits * (d + 2);
  float M = -INFINITY;
  for (int z = 0; z < splits; ++z) M = fmaxf(M, parts[z * (d + 2)]);
  float L = 0.0f;
  for (int z = 0; z < splits; ++z)
    if (parts[z * (d + 2)] != -INFINITY) L += expf(parts[z * (d + 2)] - M) * parts[z * (d + 2) + 1];
  const float inv = 1.0f / L;
  const int64_t o = b * a.q_heads * d + h * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float v = 0.0f;
    for (int z = 0; z < splits; ++z) {
      const float* p = parts + z * (d + 2);
      if (p[0] != -INFINITY) v += expf(p[0] - M) * p[2 + i];
    }
    store_act(a.out, a.act_kind, o + i, v * inv);
  }
}

// Shared memory the decode kernel needs with W warps.
size_t decode_smem_bytes(int64_t d, int W) {
  return static_cast<size_t>(d + static_cast<int64_t>(W) * kKeyTile * (2 * d + 1) + 2 * W + static_cast<int64_t>(W) * d) *
         sizeof(float);
}

// Warps per decode block: enough to cover the cache in one pass of tiles, at most 8, within the
// device's opt-in shared memory. From max_seq, not this step's lengths (graphs replay launches).
int decode_warps(const AttentionLaunch& a) {
  int W = static_cast<int>(std::min<int64_t>(8, std::max<int64_t>(1, (a.max_seq + kKeyTile - 1) / kKeyTile)));
  while (W > 1 && decode_smem_bytes(a.head_dim, W) > static_cast<size_t>(a.smem_optin)) --W;
  return W;
}

// How a decode launch splits each (row, head)'s keys: `splits` blocks of `chunk` slots (a whole
// number of key tiles). Splitting pays when the (row, head) pairs leave SMs idle (batch 1 on a GPU
// of 132 SMs has 16 to 32 heads): aim at two blocks per SM, and give each split at least one pass
// of its warps over the keys, so a short cache stays in one block.
struct DecodeSplit {
  int splits = 1;
  int64_t chunk = 0;
};
DecodeSplit decode_split(const AttentionLaunch& a, int W) {
  const int64_t tiles = std::max<int64_t>(1, (a.max_seq + kKeyTile - 1) / kKeyTile);
  DecodeSplit sp;
  sp.chunk = tiles * kKeyTile;
  const int64_t pairs = a.items * a.q_heads;
  if (a.sm_count <= 0 || pairs >= a.sm_count) return sp;
  const int64_t want = (2 * static_cast<int64_t>(a.sm_count) + pairs - 1) / pairs;
  const int64_t most = std::max<int64_t>(1, tiles / W);  // at least W tiles (one pass) each
  const int64_t splits = std::min<int64_t>({want, most, 64});
  if (splits <= 1) return sp;
  const int64_t tiles_each = (tiles + splits - 1) / splits;
  sp.chunk = tiles_each * kKeyTile;
  sp.splits = static_cast<int>((tiles + tiles_each - 1) / tiles_each);
  return sp;
}

template <typename T>
void launch_decode_attention(cudaStream_t stream, const AttentionLaunch& a) {
  const int W = decode_warps(a);
  const size_t smem = decode_smem_bytes(a.head_dim, W);
  if (smem > static_cast<size_t>(a.smem_optin))
    throw Error("CUDA decode attention: head_dim " + std::to_string(a.head_dim) + " needs " + std::to_string(smem) +
                " bytes of shared memory, the device allows " + std::to_string(a.smem_optin));
  const DecodeSplit sp = decode_split(a, W);
  if (sp.splits > 1 && !a.workspace)
    throw Error("CUDA decode attention: a split launch without its workspace (decode_attention_workspace)");
  allow_dynamic_smem(decode_attention_kernel<T>, smem);
  const dim3 grid(static_cast<unsigned>(a.items), static_cast<unsigned>(a.q_heads), static_cast<unsigned>(sp.splits));
  decode_attention_kernel<T><<<grid, W * 32, smem, stream>>>(a, sp.chunk);
  FTX_CUDA_CHECK(cudaGetLastError());
  if (sp.splits == 1) return;
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(256, (a.head_dim + 31) / 32 * 32));
  merge_decode_splits_kernel<<<dim3(static_cast<unsigned>(a.items), static_cast<unsigned>(a.q_heads)), threads, 0,
                               stream>>>(a, sp.splits);
  FTX_CUDA_CHECK(cudaGetLastError());
}

template <int QPW, typename T>
void launch_attention_kernel(cudaStream_t stream, const AttentionLaunch& a, int warps) {
  const int64_t QT = static_cast<int64_t>(warps) * QPW;
  const int64_t tiles = (a.S + QT - 1) / QT;
  const size_t smem = static_cast<size_t>(kKeyTile * (a.head_dim + 1) + kKeyTile * a.head_dim + QT * a.head_dim) *
                      sizeof(float);
  // Beyond the default dynamic limit (head_dim > ~150): opt in (once), Hopper has 227 KB.
  allow_dynamic_smem(attention_kernel<QPW, T>, smem);
  const dim3 grid(static_cast<unsigned>(a.items * tiles), static_cast<unsigned>(a.q_heads));
  attention_kernel<QPW, T><<<grid, warps * 32, smem, stream>>>(a, tiles);
  FTX_CUDA_CHECK(cudaGetLastError());
}

// Store this call's K and V, then attend (decode: one query per (row, head), the warps split the
// keys; prefill: 16 queries per block).
template <typename T>
void attend(cudaStream_t stream, const AttentionLaunch& a, unsigned store_blocks) {
  store_kv_kernel<T><<<store_blocks, 256, 0, stream>>>(a);
  FTX_CUDA_CHECK(cudaGetLastError());
  if (!a.lengths)  // decode: one query per row
    launch_decode_attention<T>(stream, a);
  else  // prefill, or an append after past[b] tokens
    launch_attention_kernel<4, T>(stream, a, 4);
}

}  // namespace

size_t decode_attention_workspace(const AttentionLaunch& a) {
  if (a.items <= 0 || a.q_heads <= 0 || a.head_dim < 1) return 0;
  const DecodeSplit sp = decode_split(a, decode_warps(a));
  if (sp.splits <= 1) return 0;
  return static_cast<size_t>(a.items * a.q_heads) * static_cast<size_t>(sp.splits) *
         static_cast<size_t>(a.head_dim + 2);
}

void invoke_attention(cudaStream_t stream, const AttentionLaunch& a) {
  if (a.items <= 0 || a.S <= 0 || a.q_heads <= 0) return;
  if (a.head_dim < 1 || a.head_dim > kMaxAttentionHeadDim)
    throw Error("CUDA attention: head_dim " + std::to_string(a.head_dim) + " is not supported (1.." +
                std::to_string(kMaxAttentionHeadDim) + ")");
  if (a.kv_heads < 1 || a.q_heads % a.kv_heads != 0)
    throw Error("CUDA attention: q_heads " + std::to_string(a.q_heads) + " is not a multiple of kv_heads " +
                std::to_string(a.kv_heads));
  if (a.q_heads > 65535 || a.items * ((a.S + 15) / 16) > 0x7fffffff)
    throw Error("CUDA attention: grid too large (" + std::to_string(a.items) + " items, " + std::to_string(a.S) +
                " tokens, " + std::to_string(a.q_heads) + " heads)");
  if (a.act_kind != ElemKind::kFp32 && a.act_kind != ElemKind::kFp16 && a.act_kind != ElemKind::kBf16)
    throw Error("CUDA attention: activations are fp32, fp16 or bf16");
  const size_t store = static_cast<size_t>(a.items) * a.S * a.kv_heads * a.head_dim;
  const unsigned store_blocks = static_cast<unsigned>(std::min<size_t>((store + 255) / 256, 65536));
  switch (a.kv_kind) {
    case ElemKind::kFp32: attend<float>(stream, a, store_blocks); break;
    case ElemKind::kFp16: attend<__half>(stream, a, store_blocks); break;
    case ElemKind::kBf16: attend<__nv_bfloat16>(stream, a, store_blocks); break;
    case ElemKind::kInt8: attend<int8_t>(stream, a, store_blocks); break;
    case ElemKind::kFp8E4M3: attend<__nv_fp8_e4m3>(stream, a, store_blocks); break;
  }
}

}  // namespace ftx::cuda
