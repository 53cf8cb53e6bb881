// KV caches in every dtype a backend holds them in, and the ops that move their rows: a cache in
// the backend's own dtype for half weights (fp32 on the CPU, the half type on a GPU), the INT8
// cache (TensorRT-LLM's: x · (1/scale) rounded to nearest even and saturated, read as q · scale),
// the FP8 one (E4M3 codes of x · (1/scale)); beam-style row gathers of any row length and the
// pitched copy that grows a cache. Caches compared exactly (their codes for int8 and FP8),
// attention outputs as in attention_ops.cc.
#include <cstring>

#include "formats/error.h"
#include "unit/backend_ops/attention_scenario.h"

namespace ftx::test {
namespace {

// Prefill two prompts into rows 2 and 0, decode rows 2, 0 and 1 (row 1 at the cache's last slot,
// over its garbage history), then a beam reorder with a row that is both read and overwritten.
void prefill_decode_gather(OpTest& t, AttnScenario& sc, float lim) {
  sc.prefill(t, 40, {40, 17}, {2, 0}, {}, lim);
  sc.decode(t, {2, 0, 1}, {40, 17, static_cast<int32_t>(sc.shape.max_seq - 1)}, lim);
  sc.gather({0, 1, 2}, {2, 0, 0});
}

const std::vector<AttnCase> kCacheCases = {kAttnCases[0], kAttnCases[1], kAttnCases[2], kAttnCases[4], kAttnCases[8]};

}  // namespace

// The cache a backend allocates for half weights, in its kv_dtype(): with inputs already
// representable in the half type storing is exact, so every backend holds the same values.
BACKEND_OP_TEST(HalfKvCache, "alloc_kv", "release_kv", "context_attention", "decode_attention", "gather_cache_rows") {
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (const AttnCase& c : kCacheCases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + attn_name(c));
      AttnScenario sc(*this, c, 1000, 3, 0, KvFormat{t});
      sc.backend_kv_dtype = true;
      prefill_decode_gather(*this, sc, 2.0f);
      expect_attention_matches(*this, sc, {t});
    }
}

// The INT8 cache: inputs reach ±3.2 with a scale of 0.021, so some saturate (and -128 is reached).
BACKEND_OP_TEST(Int8KvCache, "context_attention", "decode_attention", "gather_cache_rows") {
  for (const AttnCase& c : kCacheCases) {
    SCOPED_TRACE(attn_name(c));
    AttnScenario sc(*this, c, 1000, 3, 0, KvFormat{DType::kInt8, 0.021f});
    prefill_decode_gather(*this, sc, 3.2f);
    expect_attention_matches(*this, sc);
  }
}

// The FP8 cache a backend allocates (--fp8-kv-cache), with the layer's scale: inputs reach ±3
// with a scale of 0.005 (±448 · 0.005 = ±2.24), so some saturate.
BACKEND_OP_TEST(Fp8KvCache, "require_fp8", "alloc_kv", "release_kv", "context_attention", "decode_attention",
                "gather_cache_rows") {
  try {
    be().require_fp8("the op suite's FP8 KV cache");
  } catch (const Error& e) {  // a GPU without FP8 (before sm_89) refuses it, naming the device
    if (on_cpu()) throw;
    GTEST_SKIP() << e.what();
  }
  for (const AttnCase& c : kCacheCases) {
    SCOPED_TRACE(attn_name(c));
    AttnScenario sc(*this, c, 1000, 3, 0, KvFormat{DType::kFloat8E4M3, 0.005f});
    sc.backend_kv_dtype = true;
    prefill_decode_gather(*this, sc, 3.0f);
    expect_attention_matches(*this, sc);
  }
}

// Beam reorders of fp32 cache rows: swaps, cycles, fan-out of one parent, identity pairs, a
// repeated destination (the last pair wins), nothing to do; all reads before any write.
BACKEND_OP_TEST(GatherCacheRows, "gather_cache_rows") {
  struct Case {
    std::vector<int32_t> dst, src;
  };
  const Case cases[] = {{{0, 1}, {1, 0}},       {{0, 1, 2}, {1, 2, 0}}, {{1, 2, 3}, {0, 0, 0}},
                        {{0, 1, 2, 3, 4}, {0, 0, 1, 1, 4}}, {{2, 2, 1}, {0, 1, 3}}, {{3}, {3}}};
  for (const Case& c : cases)
    for (int64_t row_elems : {7, 64, 4096}) {
      SCOPED_TRACE("row_elems " + std::to_string(row_elems) + " first dst " + std::to_string(c.dst[0]));
      const auto start = random(5 * row_elems);
      expect_matches(
          [&](ops::Backend& b) {
            Buffers mem(b);
            const ops::KvCache cache = mem.kv(DType::kFloat32, start.size(), start);
            b.gather_cache_rows(cache, c.dst.data(), c.src.data(), static_cast<int64_t>(c.dst.size()), row_elems);
            return Outs{{"cache", mem.kv_values(cache, start.size()), {}, true}};
          },
          [&] {
            std::vector<float> want = start;
            for (size_t i = 0; i < c.dst.size(); ++i)
              std::copy_n(start.begin() + c.src[i] * row_elems, row_elems, want.begin() + c.dst[i] * row_elems);
            return Outs{{"cache", want, {}, true}};
          },
          Tol{});
    }
}

// Int8 rows of an odd number of bytes, and of 1, 2, 4 and 8 (each a narrower copy unit): every
// byte moves, none past the row (a copy in 2-byte units once dropped the last byte of an odd row).
BACKEND_OP_TEST(GatherInt8CacheRowsOfAnyByteLength, "gather_cache_rows") {
  const std::vector<int32_t> dst = {0, 1, 2, 3, 4}, src = {4, 0, 0, 1, 2};  // fan-out and a cycle
  for (int64_t row_elems : {1, 2, 3, 4, 7, 8, 13, 24, 4097}) {
    SCOPED_TRACE("row bytes " + std::to_string(row_elems));
    std::vector<float> start(static_cast<size_t>(5 * row_elems));
    for (float& b : start) b = static_cast<float>(random_int(-128, 127));
    expect_matches(
        [&](ops::Backend& b) {
          Buffers mem(b);
          const ops::KvCache cache = mem.kv(DType::kInt8, start.size(), start, 0.02f);
          b.gather_cache_rows(cache, dst.data(), src.data(), 5, row_elems);
          return Outs{{"cache", mem.kv_values(cache, start.size()), {}, true}};
        },
        [&] {
          std::vector<float> want = start;
          for (size_t i = 0; i < dst.size(); ++i)
            std::copy_n(start.begin() + src[i] * row_elems, row_elems, want.begin() + dst[i] * row_elems);
          return Outs{{"cache", want, {}, true}};
        },
        Tol{});
  }
}

// Growing the KV cache keeps every row: dst[i · dst_pitch + j] := src[i · src_pitch + j] for j <
// width, in elements of each cache dtype; the destination's other elements are left alone.
BACKEND_OP_TEST(CopyKv2dGrowsACacheLikeTheCpu, "copy_kv_2d") {
  const int64_t height = 6, width = 40, src_pitch = 48, dst_pitch = 112;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8, DType::kFloat8E4M3}) {
    SCOPED_TRACE(dtype_name(t));
    auto values = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v)
        x = t == DType::kInt8 ? static_cast<float>(random_int(-128, 127))
            : t == DType::kFloat8E4M3 ? static_cast<float>(random_int(0, 126))
                                      : round_to(t, random(1)[0]);
      return v;
    };
    const auto src = values(height * src_pitch), dst = values(height * dst_pitch);
    expect_matches(
        [&](ops::Backend& b) {
          Buffers mem(b);
          const ops::KvCache s = mem.kv(t, src.size(), src, 0.5f), d = mem.kv(t, dst.size(), dst, 0.5f);
          b.copy_kv_2d(d, dst_pitch, s, src_pitch, width, height);
          return Outs{{"destination", mem.kv_values(d, dst.size()), {}, true}};
        },
        [&] {
          std::vector<float> want = dst;
          for (int64_t i = 0; i < height; ++i)
            std::copy_n(src.begin() + i * src_pitch, width, want.begin() + i * dst_pitch);
          return Outs{{"destination", want, {}, true}};
        },
        Tol{});
  }
}

}  // namespace ftx::test
