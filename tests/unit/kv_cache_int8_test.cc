// The INT8 KV cache (--int8-kv-cache) on the CPU backend: the element conversion (hand-computed
// values), attention over an int8 cache against fp32 attention over the dequantised keys and
// values, the cache moves (row gathers, growth copies) in int8 bytes, the engine's histories
// through cache growth and beam-style row copies, and the scale files' errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "engine_test_util.h"
#include "formats/error.h"
#include "lib/engine/kv_cache_scales.h"

namespace ftx {
namespace {

// Round to nearest, ties to even, saturated to [-128, 127] (TensorRT-LLM's cvt.rni.sat.s8.f32).
TEST(KvInt8, QuantizeRoundsHalfToEvenAndSaturates) {
  const struct {
    float x, q;
  } cases[] = {{0.5f, 0}, {1.5f, 2}, {2.5f, 2}, {-0.5f, 0}, {-1.5f, -2}, {-2.5f, -2}, {0.49f, 0}, {3.51f, 4},
               {126.5f, 126}, {127.49f, 127}, {127.5f, 127}, {300.0f, 127}, {-127.5f, -128}, {-128.0f, -128},
               {-128.6f, -128}, {-1000.0f, -128}, {0.0f, 0}};
  for (const auto& c : cases) EXPECT_EQ(ops::quantize_kv(c.x, 1.0f), static_cast<int8_t>(c.q)) << c.x;
  // x · kv_orig_quant: 0.3 / 0.1 is 3 steps (x times the fp32 reciprocal of the scale).
  EXPECT_EQ(ops::quantize_kv(0.3f, 1.0f / 0.1f), 3);
  EXPECT_EQ(ops::quantize_kv(-0.25f, 1.0f / 0.1f), -2);  // -2.5 steps: ties to even
}

struct Caches {
  cpu::CpuBackend& be;
  ops::KvCache k, v;
  Caches(cpu::CpuBackend& b, size_t n, float scale, DType t) : be(b), k(b.alloc_kv(n, t)), v(b.alloc_kv(n, t)) {
    k.scale = v.scale = scale;
    std::memset(k.data, 0, n * dtype_size(k.dtype));
    std::memset(v.data, 0, n * dtype_size(v.dtype));
  }
  ~Caches() {
    be.release_kv(k);
    be.release_kv(v);
  }
};

// Prefill into an int8 cache, then decode steps: the outputs equal fp32 attention over the same
// tokens whose K and V were replaced by their dequantised values (q · scale, computed here) — the
// int8 cache changes what is stored, nothing else. MHA and MQA.
TEST(KvInt8, AttentionEqualsFp32OverDequantisedValues) {
  for (const int64_t kv_heads : {int64_t(3), int64_t(1)}) {
    SCOPED_TRACE("kv_heads " + std::to_string(kv_heads));
    cpu::CpuBackend q8(1), fp(1);
    ops::AttentionShape sh;
    sh.q_heads = 3;
    sh.kv_heads = kv_heads;
    sh.head_dim = 8;
    sh.max_seq = 12;
    sh.block_size = 4;  // paged: each row's three blocks out of order in the pool
    sh.scale = 1.0f / std::sqrt(8.0f);
    const float scale = 0.021f;
    const int64_t rows = 2, S = 5, W = sh.qkv_width();
    const size_t n = static_cast<size_t>(2 * 3 * sh.block_elems());
    const std::vector<int32_t> ids = {3, 1, 5, 0, 4, 2};
    const ops::BlockTables crow{ids.data(), 3};
    Caches c8(q8, n, scale, DType::kInt8), cf(fp, n, 1.0f, DType::kFloat32);
    ASSERT_EQ(c8.k.dtype, DType::kInt8);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-3.2f, 3.2f);  // some |x| / scale beyond 127: saturated
    // The same tokens for both, K and V dequantised for the fp32 run.
    auto make = [&](int64_t tokens) {
      std::vector<float> a(static_cast<size_t>(tokens * W)), b;
      for (float& x : a) x = u(rng);
      b = a;
      const float inv = 1.0f / scale;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t i = sh.q_heads * sh.head_dim; i < W; ++i)
          b[t * W + i] = static_cast<float>(ops::quantize_kv(a[t * W + i], inv)) * scale;
      return std::make_pair(a, b);
    };
    const std::vector<int32_t> lengths = {5, 3};
    auto [qa, qb] = make(rows * S);
    std::vector<float> o8(static_cast<size_t>(rows * S * sh.q_heads * sh.head_dim)), of(o8.size());
    q8.context_attention(o8.data(), qa.data(), rows, S, lengths.data(), crow, c8.k, c8.v, sh);
    fp.context_attention(of.data(), qb.data(), rows, S, lengths.data(), crow, cf.k, cf.v, sh);
    EXPECT_EQ(o8, of);
    std::vector<int32_t> past = {5, 3};
    for (int step = 0; step < 4; ++step) {
      auto [da, db] = make(rows);
      std::vector<float> d8(static_cast<size_t>(rows * sh.q_heads * sh.head_dim)), df(d8.size());
      q8.decode_attention(d8.data(), da.data(), rows, crow, past.data(), c8.k, c8.v, sh);
      fp.decode_attention(df.data(), db.data(), rows, crow, past.data(), cf.k, cf.v, sh);
      EXPECT_EQ(d8, df) << "step " << step;
      for (auto& p : past) ++p;
    }
    // The int8 cache holds what the fp32 one holds, in steps of the scale.
    int saturated = 0;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(static_cast<float>(c8.k.int8()[i]) * scale, cf.k.fp32()[i]) << i;
      saturated += c8.k.int8()[i] == 127 || c8.k.int8()[i] == -128;
    }
    EXPECT_GT(saturated, 0) << "the inputs were meant to saturate some keys";
  }
}

// Beam gathers and growth copies move int8 bytes (row_elems and pitches are in elements).
TEST(KvInt8, GatherAndCopyMoveInt8Rows) {
  cpu::CpuBackend be(1);
  const int64_t row = 6;
  ops::KvCache c = be.alloc_kv(4 * row, DType::kInt8);
  c.scale = 0.5f;
  for (int64_t i = 0; i < 4 * row; ++i) c.int8()[i] = static_cast<int8_t>(i - 12);
  const std::vector<int32_t> dst = {0, 1, 3}, src = {3, 0, 0};  // row 0 is read and overwritten
  be.gather_cache_rows(c, dst.data(), src.data(), 3, row);
  for (int64_t j = 0; j < row; ++j) {
    EXPECT_EQ(c.int8()[0 * row + j], 3 * row + j - 12);
    EXPECT_EQ(c.int8()[1 * row + j], j - 12);
    EXPECT_EQ(c.int8()[2 * row + j], 2 * row + j - 12);
    EXPECT_EQ(c.int8()[3 * row + j], j - 12);
  }
  ops::KvCache grown = be.alloc_kv(4 * 9, DType::kInt8);
  grown.scale = 0.5f;
  be.copy_kv_2d(grown, 9, c, row, row, 4);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < row; ++j) EXPECT_EQ(grown.int8()[r * 9 + j], c.int8()[r * row + j]);
  grown.scale = 0.25f;
  EXPECT_THROW(be.copy_kv_2d(grown, 9, c, row, row, 4), Error);  // another layer's scale
  be.release_kv(grown);
  be.release_kv(c);
}

// The engine with an int8 cache: growing the cache mid-decode (more rows and slots) keeps every
// row's history, and a beam-style copy_rows gives the copied row the source's next logits.
TEST(KvInt8, EngineHistoriesSurviveGrowthAndRowCopies) {
  const std::string dir = test::engine_fixtures() + "/gpt2/1-gpu";
  dist::SingleRank comm;
  cpu::CpuBackend be(1);
  QuantPolicy int8_kv;
  int8_kv.int8_kv_cache = true;
  ModelWeights w = ModelWeights::load(dir, 0, 1, be, int8_kv);
  ASSERT_EQ(w.kv_dtype(), DType::kInt8);
  ASSERT_GT(w.layers[0].kv_scale, 0.0f);
  const int64_t V = w.config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 2, 7}, {11, 3}};
  const std::vector<int32_t> feed = {4, 8, 15, 16, 23};
  auto run = [&](bool grow) {
    Engine eng(w, be, comm);
    eng.reserve(2, 12, 8);
    std::vector<float> logits(static_cast<size_t>(3 * V));
    eng.prefill(prompts, {0, 1}, logits.data());
    std::vector<std::vector<float>> out;
    for (size_t s = 0; s < feed.size(); ++s) {
      if (grow && s == 2) eng.reserve(3, 40, 16);
      eng.decode({feed[s], feed[s]}, {0, 1}, logits.data());
      out.emplace_back(logits.begin(), logits.begin() + 2 * V);
    }
    if (grow) {  // row 2 takes row 0's history: its next logits are row 0's
      eng.copy_rows({2}, {0});
      eng.decode({7, 7}, {0, 2}, logits.data());
      EXPECT_TRUE(test::logits_close(logits.data() + V, logits.data(), V, 1e-6));
    }
    return out;
  };
  const auto grown = run(true), fixed = run(false);
  for (size_t s = 0; s < feed.size(); ++s)
    EXPECT_TRUE(test::logits_close(grown[s].data(), fixed[s].data(), 2 * V, 1e-6)) << "step " << s;
}

// The int8 cache takes a quarter of the fp32 cache's bytes (what reserve() checks against memory).
TEST(KvInt8, CacheTakesAQuarterOfFp32) {
  const std::string dir = test::engine_fixtures() + "/gpt2/1-gpu";
  dist::SingleRank comm;
  cpu::CpuBackend fp(1), q8(1);
  QuantPolicy int8_kv;
  int8_kv.int8_kv_cache = true;
  ModelWeights wf = ModelWeights::load(dir, 0, 1, fp), wq = ModelWeights::load(dir, 0, 1, q8, int8_kv);
  Engine ef(wf, fp, comm), eq(wq, q8, comm);
  const int64_t rows = 4, seq = 64, cfg_bytes = 2 * wf.config().num_layer * rows * wf.config().hidden() * seq;
  // bytes_for = cache + workspaces; the workspaces are the same for both.
  EXPECT_EQ(ef.bytes_for(rows, seq, 8) - eq.bytes_for(rows, seq, 8), cfg_bytes * 3);
}

// A folder without the scale files: one error naming the first missing file, before any weight
// is loaded; a file of the wrong size or a non-positive scale, likewise.
TEST(KvInt8, MissingOrBadScaleFilesAreErrors) {
  const std::string src = test::engine_fixtures() + "/gpt2/1-gpu";
  const std::string tmp = ::testing::TempDir() + "/kv8_scales_" + std::to_string(::getpid());
  std::filesystem::remove_all(tmp);
  std::filesystem::copy(src, tmp);
  cpu::CpuBackend be(1);
  QuantPolicy int8_kv;
  int8_kv.int8_kv_cache = true;
  const std::string f1 = tmp + "/" + kv_cache_scale_file(1);
  std::filesystem::remove(f1);
  try {
    ModelWeights::load(tmp, 0, 1, be, int8_kv);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kv_cache_scale_file(1)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--calibrate-kv-cache"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  cpu::CpuBackend fp(1);  // the floating-point cache needs no scales
  EXPECT_NO_THROW(ModelWeights::load(tmp, 0, 1, fp));
  for (const std::vector<float>& bad : {std::vector<float>{0.0f}, std::vector<float>{-1.0f}, std::vector<float>{1, 2}}) {
    FILE* f = std::fopen(f1.c_str(), "wb");
    std::fwrite(bad.data(), sizeof(float), bad.size(), f);
    std::fclose(f);
    EXPECT_THROW(read_kv_cache_scale(tmp, 1), Error);
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace ftx
