// Token embeddings with their position terms (learned, fairseq's sinusoids, none; scaled), from fp32
// and half tables, and rotary position embeddings (GPT-J's interleaved pairs, NeoX's halves,
// partial rotary, linear rope scaling), against their formulas in float64.
#include <cmath>
#include <string>

#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"

namespace ftx::test {

// out[r] = wte[ids[r]] · scale + the position term of positions[r] + offset. The CPU against
// float64: 1e-6 of |wte · scale| + |position term| (two fp32 roundings).
BACKEND_OP_TEST(Embedding, "embedding", "upload_weight") {
  const int64_t V = 50, P = 3000, rows = 13;
  for (auto table : {ops::PositionTable::kNone, ops::PositionTable::kLearned, ops::PositionTable::kSinusoidal})
    for (int64_t H : {1, 2, 33, 64, 1000})
      for (int64_t offset : {0, 2}) {
        SCOPED_TRACE("table " + std::to_string(static_cast<int>(table)) + " H " + std::to_string(H) + " offset " +
                     std::to_string(offset));
        std::vector<int32_t> ids(rows), pos(rows);
        for (int64_t r = 0; r < rows; ++r) {
          ids[r] = random_int(0, V - 1);
          pos[r] = random_int(0, static_cast<int32_t>(P - 1 - offset));
        }
        pos[0] = 0;
        const auto wte = random(V * H), wpe = random(P * H);
        const float scale = offset ? std::sqrt(static_cast<float>(H)) : 1.0f;
        const bool learned = table == ops::PositionTable::kLearned;
        expect_matches(
            [&](ops::Backend& b) {
              Buffers mem(b);
              const ops::Weight w = b.upload_weight(wte.data(), DType::kFloat32, wte.size());
              float* out = mem.alloc(rows * H);
              b.embedding(out, w, learned ? mem.put(wpe) : nullptr, table, offset, ids.data(), pos.data(), rows, H, scale);
              b.release_weight(w);
              return Outs{{"out", mem.get(out, rows * H)}};
            },
            [&] {
              Out o{"out", std::vector<float>(rows * H), std::vector<double>(rows * H)};
              for (int64_t r = 0; r < rows; ++r) {
                const int64_t p = pos[r] + offset;
                const std::vector<double> sin = table == ops::PositionTable::kSinusoidal ? sinusoidal_row(p, H)
                                                                                        : std::vector<double>(H, 0.0);
                for (int64_t i = 0; i < H; ++i) {
                  const double e = static_cast<double>(wte[ids[r] * H + i]) * scale;
                  const double t = learned ? wpe[p * H + i] : sin[i];
                  o.values[r * H + i] = static_cast<float>(e + t);
                  o.scale[r * H + i] = std::fabs(e) + std::fabs(t);
                }
              }
              return Outs{o};
            },
            Tol{1e-6, 1e-5});
      }
}

// A half table is widened exactly: the lookup in the rounded table, times 2, bit for bit.
BACKEND_OP_TEST(HalfWeightEmbedding, "embedding", "upload_weight") {
  const int64_t V = 50, H = 96, rows = 9;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    const auto table = random(V * H);
    std::vector<int32_t> ids(rows), pos(rows, 0);
    for (int64_t r = 0; r < rows; ++r) ids[r] = random_int(0, V - 1);
    expect_matches(
        {t},
        [&](ops::Backend& b) {
          Buffers mem(b);
          const ops::Weight w = b.upload_weight(table.data(), DType::kFloat32, table.size());
          float* out = mem.alloc(rows * H);
          b.embedding(out, w, nullptr, ops::PositionTable::kNone, 0, ids.data(), pos.data(), rows, H, 2.0f);
          b.release_weight(w);
          return Outs{{"out", mem.get(out, rows * H), {}, true}};
        },
        [&] {
          std::vector<float> want(rows * H);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < H; ++i) want[r * H + i] = round_to(t, table[ids[r] * H + i]) * 2.0f;
          return Outs{{"out", want, {}, true}};
        },
        Tol{});
  }
}

// Rotates the first rot_dim dims of the first `heads` heads of each row by positions[r] · inv_freq_i
// (inv_freq_i = base^(-2i/rot_dim), divided by the factor of linear rope scaling), cos and sin times
// the magnitude (yarn's and longrope's attention factor), the rest of the row (the unrotated dims
// and the V heads) left alone. The CPU against float64: 1e-6 of m·(|x0| + |x1|) of each pair.
BACKEND_OP_TEST(Rotary, "rotary") {
  struct Case {
    int64_t heads, head_dim, rot_dim, extra;  // extra: trailing columns (V heads) left alone
    RotaryStyle style;
    double base, linear;                      // linear: rope scaling factor (1: none)
    double magnitude = 1.0;                   // RotaryFrequencies::magnitude
  };
  const Case cases[] = {{2, 16, 16, 32, RotaryStyle::kInterleaved, 10000.0, 1.0},
                        {2, 16, 16, 32, RotaryStyle::kHalfSplit, 10000.0, 1.0},
                        {5, 64, 16, 64, RotaryStyle::kHalfSplit, 10000.0, 1.0},  // partial (NeoX 25%)
                        {3, 10, 6, 0, RotaryStyle::kInterleaved, 1e6, 1.0},
                        {3, 10, 6, 7, RotaryStyle::kHalfSplit, 1e6, 1.0},
                        {8, 128, 64, 256, RotaryStyle::kInterleaved, 10000.0, 1.0},
                        {4, 64, 64, 128, RotaryStyle::kHalfSplit, 500000.0, 4.0},
                        {4, 16, 8, 32, RotaryStyle::kHalfSplit, 10000.0, 1.0, 1.1832159566199232},  // Phi-3-like
                        {3, 16, 16, 0, RotaryStyle::kInterleaved, 100.0, 2.0, 0.8}};
  for (const Case& c : cases)
    for (int64_t rows : {1, 6}) {
      SCOPED_TRACE("heads " + std::to_string(c.heads) + " d " + std::to_string(c.head_dim) + " rot " +
                   std::to_string(c.rot_dim) + " linear " + std::to_string(c.linear) + " magnitude " +
                   std::to_string(c.magnitude) + " rows " + std::to_string(rows));
      const int64_t stride = c.heads * c.head_dim + c.extra;
      std::vector<int32_t> pos(rows);
      for (auto& p : pos) p = random_int(0, 4000);
      const auto qkv = random(rows * stride);
      ops::RotaryFrequencies freq =
          c.linear != 1.0 ? ops::RotaryFrequencies(c.base, RopeScaling::linear(c.linear)) : ops::RotaryFrequencies(c.base);
      freq.magnitude = c.magnitude;
      expect_matches(
          [&](ops::Backend& b) {
            Buffers mem(b);
            float* x = mem.put(qkv);
            b.rotary(x, rows, stride, pos.data(), c.heads, c.head_dim, c.rot_dim, c.style, freq);
            return Outs{{"qkv", mem.get(x, rows * stride)}};
          },
          [&] {
            Out o{"qkv", qkv, std::vector<double>(qkv.size(), 0.0)};
            const int64_t pairs = c.rot_dim / 2;
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t h = 0; h < c.heads; ++h)
                for (int64_t i = 0; i < pairs; ++i) {
                  const double inv = std::pow(c.base, -2.0 * static_cast<double>(i) / static_cast<double>(c.rot_dim));
                  const double angle = pos[r] * inv / c.linear;
                  const int64_t base = r * stride + h * c.head_dim;
                  const int64_t a = base + (c.style == RotaryStyle::kInterleaved ? 2 * i : i);
                  const int64_t e = base + (c.style == RotaryStyle::kInterleaved ? 2 * i + 1 : i + pairs);
                  const double x0 = qkv[a], x1 = qkv[e];
                  const double m = c.magnitude;
                  o.values[a] = static_cast<float>(m * (x0 * std::cos(angle) - x1 * std::sin(angle)));
                  o.values[e] = static_cast<float>(m * (x1 * std::cos(angle) + x0 * std::sin(angle)));
                  o.scale[a] = o.scale[e] = m * (std::fabs(x0) + std::fabs(x1));
                }
            return Outs{o};
          },
          Tol{1e-6, 1e-5});
    }
}

}  // namespace ftx::test
