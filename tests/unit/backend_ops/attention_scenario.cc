#include "unit/backend_ops/attention_scenario.h"

#include <algorithm>
#include <cmath>

#include "lib/ops/host_math.h"

namespace ftx::test {

const std::vector<AttnCase> kAttnCases = {
    {4, 4, 16, false}, {4, 1, 16, false},                   // MHA, MQA
    {6, 2, 25, false},                                      // grouped, odd head_dim
    {6, 6, 16, true},  {6, 1, 32, true},                    // ALiBi (6: not a power of two), ALiBi + MQA
    {2, 2, 1, false},  {3, 3, 64, false}, {2, 2, 128, false},
    {2, 1, 256, true},                                      // head_dim 256
};

std::string attn_name(const AttnCase& c) {
  return "q_heads " + std::to_string(c.q_heads) + " kv_heads " + std::to_string(c.kv_heads) + " head_dim " +
         std::to_string(c.head_dim) + (c.alibi ? " alibi" : "");
}

AttnScenario::AttnScenario(OpTest& t, const AttnCase& c, int64_t max_seq, int64_t pool, int64_t block_size,
                           KvFormat f)
    : blocks(pool), format(f) {
  shape.q_heads = c.q_heads;
  shape.kv_heads = c.kv_heads;
  shape.head_dim = c.head_dim;
  shape.max_seq = max_seq;
  shape.block_size = block_size > 0 ? block_size : max_seq;
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  if (c.alibi) slopes = ops::alibi_slopes(c.q_heads);
  random_start(t);
}

void AttnScenario::random_start(OpTest& t) {
  for (std::vector<float>* c : {&k0, &v0}) {
    if (format.dtype == DType::kInt8) {
      c->resize(cache_elems());
      for (float& x : *c) x = static_cast<float>(t.random_int(-128, 127));
    } else if (format.dtype == DType::kFloat8E4M3) {
      c->resize(cache_elems());
      for (float& x : *c) {
        do x = static_cast<float>(t.random_int(0, 255));
        while (x == 0x7F || x == 0xFF);  // no NaN codes: a read of garbage history stays finite
      }
    } else {
      *c = round_to(format.dtype, t.random(cache_elems()));
    }
  }
}

namespace {

std::vector<float> inputs(OpTest& t, size_t n, float lim, const AttnScenario& sc) {
  std::vector<float> x = t.random(n, -lim, lim);
  return sc.backend_kv_dtype ? round_to(sc.format.dtype, x) : x;
}

ops::AttentionShape shape_of(const AttnScenario& sc) {
  ops::AttentionShape sh = sc.shape;
  sh.alibi_slopes = sc.slopes.empty() ? nullptr : sc.slopes.data();
  return sh;
}

int64_t out_elems(const AttnScenario& sc, const AttnCall& c) { return c.B * c.S * sc.shape.q_heads * sc.shape.head_dim; }

std::string call_name(const AttnCall& c, size_t i) {
  return "call " + std::to_string(i) + (c.decode ? " (decode)" : c.past.empty() ? " (prefill)" : " (append)") + " output";
}

}  // namespace

AttnCall& AttnScenario::prefill(OpTest& t, int64_t S, std::vector<int32_t> lengths, std::vector<int32_t> rows,
                                std::vector<int32_t> past, float lim) {
  AttnCall c;
  c.B = static_cast<int64_t>(lengths.size());
  c.S = S;
  c.lengths = std::move(lengths);
  c.past = std::move(past);
  c.table = std::move(rows);
  c.qkv = inputs(t, static_cast<size_t>(c.B * S * shape.qkv_width()), lim, *this);
  calls.push_back(std::move(c));
  return calls.back();
}

AttnCall& AttnScenario::decode(OpTest& t, std::vector<int32_t> rows, std::vector<int32_t> past, float lim) {
  AttnCall c;
  c.decode = true;
  c.B = static_cast<int64_t>(past.size());
  c.past = std::move(past);
  c.table = std::move(rows);
  c.qkv = inputs(t, static_cast<size_t>(c.B * shape.qkv_width()), lim, *this);
  calls.push_back(std::move(c));
  return calls.back();
}

void AttnScenario::gather(std::vector<int32_t> dst, std::vector<int32_t> src) {
  AttnCall c;
  c.gather_dst = std::move(dst);
  c.gather_src = std::move(src);
  calls.push_back(std::move(c));
}

Outs run_scenario(ops::Backend& b, const AttnScenario& sc) {
  Buffers mem(b);
  const ops::AttentionShape sh = shape_of(sc);
  const size_t n = sc.cache_elems();
  ops::KvCache k, v;
  if (sc.backend_kv_dtype) {
    // A quantised cache in the format's dtype (the caller's choice); else the backend's own.
    const DType t = ops::kv_is_quantized(sc.format.dtype) ? sc.format.dtype : b.kv_dtype();
    k = b.alloc_kv(n, t);
    v = b.alloc_kv(n, t);
    for (auto [c, start] : {std::pair{&k, &sc.k0}, std::pair{&v, &sc.v0}}) {
      if (ops::kv_is_quantized(c->dtype)) c->scale = sc.format.scale;  // the layer's calibrated scale
      const std::vector<uint8_t> bytes = kv_bytes(c->dtype, *start);
      mem.put_bytes(c->data, bytes.data(), bytes.size());
    }
  } else {
    k = mem.kv(sc.format.dtype, n, sc.k0, sc.format.scale);
    v = mem.kv(sc.format.dtype, n, sc.v0, sc.format.scale);
  }
  Outs outs;
  for (size_t i = 0; i < sc.calls.size(); ++i) {
    const AttnCall& c = sc.calls[i];
    if (!c.gather_dst.empty()) {
      for (const ops::KvCache* cache : {&k, &v})
        b.gather_cache_rows(*cache, c.gather_dst.data(), c.gather_src.data(), static_cast<int64_t>(c.gather_dst.size()),
                            sh.block_elems());
      continue;
    }
    float* qkv = mem.put(c.qkv);
    float* out = mem.alloc(static_cast<size_t>(out_elems(sc, c)));
    if (c.decode)
      b.decode_attention(out, qkv, c.B, c.tables(), c.past.data(), k, v, sh);
    else
      b.context_attention(out, qkv, c.B, c.S, c.lengths.data(), c.tables(), k, v, sh,
                          c.past.empty() ? nullptr : c.past.data());
    outs.push_back({call_name(c, i), mem.get(out, static_cast<size_t>(out_elems(sc, c)))});
  }
  outs.push_back({"K cache", mem.kv_values(k, n), {}, true});
  outs.push_back({"V cache", mem.kv_values(v, n), {}, true});
  if (sc.backend_kv_dtype) {
    b.release_kv(k);
    b.release_kv(v);
  }
  return outs;
}

Outs ref_scenario(const AttnScenario& sc) {
  const ops::AttentionShape sh = shape_of(sc);
  RefCache k{sc.k0, sc.format}, v{sc.v0, sc.format};
  Outs outs;
  for (size_t i = 0; i < sc.calls.size(); ++i) {
    const AttnCall& c = sc.calls[i];
    if (!c.gather_dst.empty()) {
      const size_t block = static_cast<size_t>(sh.block_elems());
      for (RefCache* cache : {&k, &v}) {
        const std::vector<float> before = cache->v;
        for (size_t j = 0; j < c.gather_dst.size(); ++j)
          std::copy_n(before.begin() + c.gather_src[j] * block, block, cache->v.begin() + c.gather_dst[j] * block);
      }
      continue;
    }
    const AttentionRef r =
        c.decode ? decode_attention_ref(c.qkv, c.B, c.tables(), c.past.data(), k, v, sh)
                 : context_attention_ref(c.qkv, c.B, c.S, c.lengths.data(), c.tables(), k, v, sh,
                                         c.past.empty() ? nullptr : c.past.data());
    outs.push_back({call_name(c, i), r.out, r.scale});
  }
  outs.push_back({"K cache", k.v, {}, true});
  outs.push_back({"V cache", v.v, {}, true});
  return outs;
}

// The CPU against float64: 5e-7 of max(1, Σ p·|v|·(1 + |score|)) (reference.h; about 8 ulps, and
// 4x what any level gives on random inputs). A device against the CPU: 1e-5 of max(1, |cpu|).
void expect_attention_matches(OpTest& t, const AttnScenario& sc, const BackendOptions& o) {
  t.expect_matches(o, [&](ops::Backend& b) { return run_scenario(b, sc); }, [&] { return ref_scenario(sc); },
                   kAttentionTol);
}

}  // namespace ftx::test
