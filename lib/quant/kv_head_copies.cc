#include "lib/quant/kv_head_copies.h"

#include "formats/error.h"
#include "lib/quant/act_ranges.h"

namespace ftx::quant {

namespace {

// Each row of `a` [rows, q + 2·g·d] -> [rows, q + 2·g·times·d]: K's and V's heads (d columns each)
// repeated `times` times in place, [k0 k1] -> [k0 k0 k1 k1].
template <typename T>
std::vector<T> repeat_heads(const std::vector<T>& a, int64_t q, int64_t g, int64_t d, int64_t times) {
  const int64_t cols = q + 2 * g * d, rows = static_cast<int64_t>(a.size()) / cols;
  std::vector<T> out;
  out.reserve(static_cast<size_t>(rows * (q + 2 * g * times * d)));
  for (int64_t i = 0; i < rows; ++i) {
    const auto row = a.begin() + i * cols;
    out.insert(out.end(), row, row + q);
    for (int64_t h = 0; h < 2 * g; ++h)  // K's g heads, then V's
      for (int64_t t = 0; t < times; ++t) out.insert(out.end(), row + q + h * d, row + q + (h + 1) * d);
  }
  return out;
}

}  // namespace

int64_t kv_heads_for(const ModelConfig& cfg, int64_t tp, const std::string& origin) {
  const int64_t g = cfg.kv_head_num;
  if (!(g > 1 && g < tp)) return g;
  FTX_CHECK(tp % g == 0, origin,
            "kv_head_num " + std::to_string(g) + " does not divide the tensor parallel size " + std::to_string(tp) +
                " (each rank needs whole key/value heads)");
  return tp;
}

int64_t copy_kv_heads(HostModel& model, std::map<std::string, QuantRange>& ranges, int64_t tp) {
  ModelConfig& cfg = model.cfg;
  const int64_t g = cfg.kv_head_num;
  if (kv_heads_for(cfg, tp, model.dir + "/config.ini") == g) return 0;
  const int64_t d = cfg.size_per_head, q = cfg.head_num * d, times = tp / g;
  for (int64_t l = 0; l < cfg.num_layer; ++l) {
    const std::string base = gemm_key(l, "attention.query_key_value");
    for (const char* part : {".weight", ".bias"}) {
      if (!model.has(base + part)) continue;
      HostTensor& t = model.at(base + part);
      t.data = repeat_heads(t.data, q, g, d, times);
      t.shape.back() = q + 2 * g * times * d;
    }
    auto it = ranges.find(base);
    if (it == ranges.end()) continue;
    it->second.y = repeat_heads(it->second.y, q, g, d, times);
    it->second.w = repeat_heads(it->second.w, q, g, d, times);
  }
  cfg.kv_head_num = tp;
  return g;
}

}  // namespace ftx::quant
