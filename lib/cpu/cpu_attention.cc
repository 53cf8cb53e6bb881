// CPU attention: prefill (causal, padded batch) and one-token decode over the paged KV cache. Both
// write K and V into the cache first and then read them back from it. A row's slots are read
// through its block table (RowBlocks), block by block, in slot order. Decode attends one query at a
// time (attend_one); prefill attends blocks of queries with GEMMs (attention_blocks.h) over the
// row's keys gathered into one contiguous run, the same formula summed in another order; neither
// sum depends on the block size. The cache is fp32, or int8
// (--int8-kv-cache): quantised as stored (ops::quantize_kv), each element dequantised (q · scale)
// as read, in prefill as in decode, so a prompt run at once and the same tokens appended one by
// one see the same keys and values. An FP8 E4M3 cache (--fp8-kv-cache) is the same with
// ops::quantize_kv_fp8 and e4m3 · scale. A softcap (AttentionShape::softcap) caps each scaled score
// before ALiBi; a sliding window (AttentionShape::window) leaves out a linear cache's slots behind
// it (prefill from the block's first window start, masking the rest per query) and masks a
// circular cache's by position.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/cpu/attention_blocks.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/simd_math.h"
#include "formats/fp8_e4m3.h"

namespace ftx::cpu {

namespace {

// Position of what slot s of a circular cache of `ring` slots holds when the newest position is
// q_pos (the latest p <= q_pos with p % ring == s); a linear cache (ring 0) holds position s.
inline int64_t slot_position(int64_t s, int64_t q_pos, int64_t ring) {
  return ring > 0 ? q_pos - ((q_pos - s) % ring + ring) % ring : s;
}

// K or V elements of a cache: fp32 as stored, or int8 / E4M3 read as q · the layer's scale. The
// products and sums go through simd_math's vectorised loops; widen is prefill's copy in fp32.
struct Fp32Elems {
  const float* p;
  Fp32Elems operator+(int64_t off) const { return {p + off}; }
  float dot(const float* q, int64_t n) const { return cpu::dot(q, p, n); }
  void add_scaled(float* out, float w, int64_t n) const { axpy(out, w, p, n); }
  void widen(float* out, int64_t n) const { std::memcpy(out, p, static_cast<size_t>(n) * sizeof(float)); }
};
struct Int8Elems {
  const int8_t* p;
  float scale;
  Int8Elems operator+(int64_t off) const { return {p + off, scale}; }
  float dot(const float* q, int64_t n) const { return cpu::dot(q, p, scale, n); }
  void add_scaled(float* out, float w, int64_t n) const { axpy(out, w, p, scale, n); }
  void widen(float* out, int64_t n) const {  // q · scale, exactly as dot and add_scaled read them
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]) * scale;
  }
};
struct Fp8Elems {
  const uint8_t* p;
  float scale;
  Fp8Elems operator+(int64_t off) const { return {p + off, scale}; }
  float dot(const float* q, int64_t n) const { return dot_e4m3(q, p, scale, n); }
  void add_scaled(float* out, float w, int64_t n) const { axpy_e4m3(out, w, p, scale, n); }
  void widen(float* out, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) out[i] = quant::kE4M3.value[p[i]] * scale;
  }
};

// Where one KV head of one row keeps its slots: slot s at element offset(s) of the cache, i.e. in
// block table[s / block_size], at head `head` and offset s % block_size. Only the indexing: the
// element views above say how an element is read.
struct RowBlocks {
  const int32_t* table;
  int64_t block_size, block_elems, head_off;  // head_off = head · block_size · d
  int64_t d;
  int64_t offset(int64_t s) const {
    return table[s / block_size] * block_elems + head_off + (s % block_size) * d;
  }
  // Calls f(first slot, slots, element offset of the first) for each run of slots [lo, n) that lies
  // contiguously in one block, in slot order.
  template <typename F>
  void for_each_run(int64_t lo, int64_t n, F&& f) const {
    for (int64_t s = lo; s < n;) {
      const int64_t len = std::min(block_size - s % block_size, n - s);
      f(s, len, offset(s));
      s += len;
    }
  }
};

// The score of key position k_pos for a query at q_pos from its dot product: scale·dot, capped
// (AttentionShape::softcap), plus ALiBi. Without a cap the one expression the kernels always had.
inline float score_of(float dot, const ops::AttentionShape& sh, float slope, int64_t k_pos, int64_t q_pos) {
  if (sh.softcap > 0.0f) {
    const float s = dot * sh.scale;
    return sh.softcap * std::tanh(s / sh.softcap) + slope * static_cast<float>(k_pos - q_pos);
  }
  return dot * sh.scale + slope * static_cast<float>(k_pos - q_pos);
}

// out[d] = Σ_s softmax_s(score) v_s over slots [lo, n) of one cache head (n = min(q_pos + 1, ring)
// for a circular cache, whose slots hold the last `ring` positions; lo > 0 skips a linear cache's
// slots behind a sliding window). With a circular cache the window masks by position instead:
// such slots weigh nothing. k and v view the whole cache; `at` says where the head's slots are.
template <typename Elems>
void attend_one(float* out, const float* q, Elems k, Elems v, const RowBlocks& at, int64_t lo, int64_t n,
                const ops::AttentionShape& sh, float slope, int64_t q_pos, std::vector<float>& scores) {
  const int64_t d = sh.head_dim, ring = sh.memory_len;
  const bool masks = ring > 0 && sh.window > 0 && sh.window < ring;
  scores.resize(static_cast<size_t>(n - lo));  // slot s's at s - lo
  float mx = -INFINITY;
  at.for_each_run(lo, n, [&](int64_t s0, int64_t len, int64_t off) {
    for (int64_t j = 0; j < len; ++j) {
      const int64_t s = s0 + j, k_pos = slot_position(s, q_pos, ring);
      float score = -INFINITY;
      if (!masks || k_pos > q_pos - sh.window) score = score_of((k + (off + j * d)).dot(q, d), sh, slope, k_pos, q_pos);
      scores[s - lo] = score;
      mx = std::max(mx, score);
    }
  });
  const float inv = 1.0f / exp_shifted_sum(scores.data(), mx, n - lo);
  for (int64_t i = 0; i < d; ++i) out[i] = 0.0f;
  at.for_each_run(lo, n, [&](int64_t s0, int64_t len, int64_t off) {
    for (int64_t j = 0; j < len; ++j) {
      const int64_t s = s0 + j;
      if (masks && slot_position(s, q_pos, ring) <= q_pos - sh.window) continue;  // its e^-87 floor is not a weight
      (v + (off + j * d)).add_scaled(out, scores[s - lo] * inv, d);
    }
  });
}

// One layer's K and V caches, read through the element view of their dtype.
struct CacheView {
  const ops::KvCache& k;
  const ops::KvCache& v;
  // Calls f(k_elems, v_elems) with the views from cache offset `off`.
  template <typename F>
  void read(int64_t off, F&& f) const {
    if (k.dtype == DType::kInt8)
      f(Int8Elems{k.int8() + off, k.scale}, Int8Elems{v.int8() + off, v.scale});
    else if (k.dtype == DType::kFloat8E4M3)
      f(Fp8Elems{k.fp8() + off, k.scale}, Fp8Elems{v.fp8() + off, v.scale});
    else
      f(Fp32Elems{k.fp32() + off}, Fp32Elems{v.fp32() + off});
  }
  // Points kp and vp at slots [lo, n) of one head as fp32, key s at kp + (s - lo)·d: in the cache
  // itself when they lie in one block of an fp32 cache, else gathered block by block into kf and vf
  // (an int8 or E4M3 cache dequantised as q · scale, exactly as decode reads it). The GEMMs see the
  // same numbers whatever the block size.
  void contiguous(const RowBlocks& at, int64_t lo, int64_t n, std::vector<float>& kf, std::vector<float>& vf,
                  const float*& kp, const float*& vp) const {
    if (k.dtype == DType::kFloat32 && lo / at.block_size == (n - 1) / at.block_size) {
      kp = k.fp32() + at.offset(lo);
      vp = v.fp32() + at.offset(lo);
      return;
    }
    const int64_t d = at.d;
    kf.resize(static_cast<size_t>((n - lo) * d));
    vf.resize(kf.size());
    at.for_each_run(lo, n, [&](int64_t s0, int64_t len, int64_t off) {
      float* kd = kf.data() + (s0 - lo) * d;
      float* vd = vf.data() + (s0 - lo) * d;
      read(off, [&](auto ke, auto ve) {
        ke.widen(kd, len * d);
        ve.widen(vd, len * d);
      });
    });
    kp = kf.data();
    vp = vf.data();
  }
};

void check_cache(const ops::KvCache& c, const char* what) {
  if (c.dtype == DType::kFloat32) return;
  if (!ops::kv_is_quantized(c.dtype))
    throw Error(std::string("CPU attention: a ") + what + " cache in " + dtype_name(c.dtype) + " (fp32, int8 or fp8)");
  if (!(c.scale > 0.0f) || !std::isfinite(c.scale))
    throw Error(std::string("CPU attention: ") + dtype_name(c.dtype) + " " + what + " cache scale " +
                std::to_string(c.scale) + " is not a positive number");
}

// Head h of a row whose block table is `table`.
RowBlocks row_blocks(const int32_t* table, int64_t h, const ops::AttentionShape& sh) {
  return {table, sh.block_size, sh.block_elems(), h * sh.block_size * sh.head_dim, sh.head_dim};
}

void check_shape(const ops::AttentionShape& sh, const ops::BlockTables& tables) {
  if (sh.block_size < 1 || tables.stride * sh.block_size < sh.max_seq || !tables.ids)
    throw Error("CPU attention: block tables of " + std::to_string(tables.stride) + " blocks of " +
                std::to_string(sh.block_size) + " tokens for rows of " + std::to_string(sh.max_seq) + " slots");
  if (sh.window < 0) throw Error("CPU attention: sliding window " + std::to_string(sh.window) + " is negative");
  if (!(sh.softcap >= 0.0f) || !std::isfinite(sh.softcap))
    throw Error("CPU attention: softcap " + std::to_string(sh.softcap) + " is not a positive number or 0");
}

// Stores the K and V of the token at slot `pos` (from its fused qkv row) in the row whose block
// table is `table`.
void store_kv(const float* qkv_row, const int32_t* table, int64_t pos, const ops::KvCache& k_cache,
              const ops::KvCache& v_cache, const ops::AttentionShape& sh) {
  const int64_t d = sh.head_dim;
  const int64_t slot = sh.memory_len > 0 ? pos % sh.memory_len : pos;
  const float* k = qkv_row + sh.q_heads * d;
  const float* v = k + sh.kv_heads * d;
  for (int64_t h = 0; h < sh.kv_heads; ++h) {
    const int64_t off = row_blocks(table, h, sh).offset(slot);
    if (k_cache.dtype == DType::kInt8) {
      const float kq = 1.0f / k_cache.scale, vq = 1.0f / v_cache.scale;  // kv_orig_quant, in fp32
      int8_t* kd = k_cache.int8() + off;
      int8_t* vd = v_cache.int8() + off;
      for (int64_t i = 0; i < d; ++i) {
        kd[i] = ops::quantize_kv(k[h * d + i], kq);
        vd[i] = ops::quantize_kv(v[h * d + i], vq);
      }
    } else if (k_cache.dtype == DType::kFloat8E4M3) {
      const float kq = 1.0f / k_cache.scale, vq = 1.0f / v_cache.scale;  // 1/kv_cache_scaling_factor, in fp32
      uint8_t* kd = k_cache.fp8() + off;
      uint8_t* vd = v_cache.fp8() + off;
      for (int64_t i = 0; i < d; ++i) {
        kd[i] = ops::quantize_kv_fp8(k[h * d + i], kq);
        vd[i] = ops::quantize_kv_fp8(v[h * d + i], vq);
      }
    } else {
      std::memcpy(k_cache.fp32() + off, k + h * d, d * sizeof(float));
      std::memcpy(v_cache.fp32() + off, v + h * d, d * sizeof(float));
    }
  }
}

}  // namespace

void CpuBackend::context_attention(ops::Act out_act, ops::Act qkv_act, int64_t B, int64_t S,
                                   const int32_t* lengths, const ops::BlockTables& tables, const ops::KvCache& k_buf,
                                   const ops::KvCache& v_buf, const ops::AttentionShape& sh, const int32_t* past) {
  float* out = out_act.fp32();
  const float* qkv = qkv_act.fp32();
  check_cache(k_buf, "K");
  check_cache(v_buf, "V");
  check_shape(sh, tables);
  const CacheView cache{k_buf, v_buf};
  const int64_t d = sh.head_dim, width = sh.qkv_width(), out_width = sh.q_heads * d;
  const int64_t group = sh.q_heads / sh.kv_heads;  // query heads per KV head (MQA: all)
  for (int64_t b = 0; b < B; ++b) {
    const int64_t p0 = past ? past[b] : 0;
    if (sh.memory_len > 0 && p0 + lengths[b] > sh.memory_len)
      throw Error("context_attention: positions " + std::to_string(p0) + ".." + std::to_string(p0 + lengths[b] - 1) +
                  " wrap the circular cache of " + std::to_string(sh.memory_len));
    for (int64_t t = 0; t < lengths[b]; ++t)
      store_kv(qkv + (b * S + t) * width, tables.row(b), p0 + t, k_buf, v_buf, sh);
  }
  // Blocks of queries of one head, each block's attention as two GEMMs (attention_blocks.h).
  constexpr int64_t kBlock = 32;
  const int64_t blocks = (S + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    std::vector<float> scratch, kf, vf;
#pragma omp for collapse(3) schedule(dynamic, 1)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < sh.q_heads; ++h)
        for (int64_t blk = 0; blk < blocks; ++blk) {
          const int64_t t0 = blk * kBlock, rows = std::min(kBlock, S - t0), live = std::max<int64_t>(0, std::min(rows, lengths[b] - t0));
          for (int64_t t = t0 + live; t < t0 + rows; ++t) {  // padding after the prompt
            float* o = out + (b * S + t) * out_width + h * d;
            std::fill(o, o + d, 0.0f);
          }
          if (live == 0) continue;
          const int64_t p0 = (past ? past[b] : 0) + t0, keys = p0 + live;
          AttentionBlock blk_args{qkv + (b * S + t0) * width + h * d, width, live, p0, nullptr, nullptr, d,
                                  sh.scale, sh.alibi_slopes ? sh.alibi_slopes[h] : 0.0f,
                                  out + (b * S + t0) * out_width + h * d, out_width, sh.softcap, sh.window};
          blk_args.key0 = first_key(p0, sh.window);
          cache.contiguous(row_blocks(tables.row(b), h / group, sh), blk_args.key0, keys, kf, vf, blk_args.k,
                           blk_args.v);
          attend_block(blk_args, scratch);
        }
  }
}

void CpuBackend::decode_attention(ops::Act out_act, ops::Act qkv_act, int64_t n, const ops::BlockTables& tables,
                                  const int32_t* past, const ops::KvCache& k_buf, const ops::KvCache& v_buf,
                                  const ops::AttentionShape& sh) {
  float* out = out_act.fp32();
  const float* qkv = qkv_act.fp32();
  check_cache(k_buf, "K");
  check_cache(v_buf, "V");
  check_shape(sh, tables);
  const CacheView cache{k_buf, v_buf};
  const int64_t d = sh.head_dim, width = sh.qkv_width(), out_width = sh.q_heads * d;
  const int64_t group = sh.q_heads / sh.kv_heads;
  int64_t work = 0;  // multiply-adds; a fork-join costs more than a small step's attention
  auto keys = [&](int64_t r) -> int64_t {
    return sh.memory_len > 0 ? std::min<int64_t>(past[r] + 1, sh.memory_len) : past[r] + 1;
  };
  // A linear cache's first slot inside the sliding window (a circular one masks by position).
  auto first = [&](int64_t r) -> int64_t {
    return sh.window > 0 && sh.memory_len == 0 ? std::max<int64_t>(0, past[r] - sh.window + 1) : 0;
  };
  for (int64_t r = 0; r < n; ++r) {
    store_kv(qkv + r * width, tables.row(r), past[r], k_buf, v_buf, sh);
    work += 2 * (keys(r) - first(r)) * d * sh.q_heads;
  }
#pragma omp parallel if (work > (int64_t(1) << 17))
  {
    std::vector<float> scores;
#pragma omp for collapse(2) schedule(static)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t h = 0; h < sh.q_heads; ++h) {
        const RowBlocks at = row_blocks(tables.row(r), h / group, sh);
        const float slope = sh.alibi_slopes ? sh.alibi_slopes[h] : 0.0f;
        cache.read(0, [&](auto k, auto v) {
          attend_one(out + r * out_width + h * d, qkv + r * width + h * d, k, v, at, first(r), keys(r), sh, slope,
                     past[r], scores);
        });
      }
  }
}

}  // namespace ftx::cpu
