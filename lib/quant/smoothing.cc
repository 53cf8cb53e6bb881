#include "lib/quant/smoothing.h"

#include <algorithm>
#include <cmath>

#include "formats/error.h"

namespace ftx::quant {

std::map<std::string, QuantRange> to_quant_ranges(const ActRanges& r) {
  std::map<std::string, QuantRange> out;
  for (const auto& kv : r.gemms) {
    QuantRange q;
    q.x.assign(kv.second.x.begin(), kv.second.x.end());
    q.y.assign(kv.second.y.begin(), kv.second.y.end());
    q.w.assign(kv.second.w.begin(), kv.second.w.end());
    out[kv.first] = std::move(q);
  }
  return out;
}

namespace {

std::vector<double> abs_max_columns(const HostTensor& w) {
  const int64_t cols = w.shape.back(), rows = w.numel() / cols;
  std::vector<double> m(static_cast<size_t>(cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[j] = std::max(m[j], std::fabs(static_cast<double>(w.data[i * cols + j])));
  return m;
}

// One smoothing: the GEMM weights `gemms` (all [H, out], input channels as rows) read the output
// of layernorm (gamma, beta); `x` is the max |input| per channel (the max over the GEMMs' own x).
std::vector<double> smooth_group(const std::vector<HostTensor*>& gemms, HostTensor& gamma, HostTensor* beta,
                                 const std::vector<double>& x, double alpha) {
  const int64_t H = gamma.numel();
  std::vector<double> wmax(static_cast<size_t>(H), 0.0);
  for (const HostTensor* g : gemms) {
    const int64_t cols = g->shape.back();
    FTX_CHECK(g->numel() == H * cols && static_cast<int64_t>(x.size()) == H, "", "smoothing: shape mismatch");
    for (int64_t j = 0; j < H; ++j)
      for (int64_t c = 0; c < cols; ++c)
        wmax[j] = std::max(wmax[j], std::fabs(static_cast<double>(g->data[j * cols + c])));
  }
  std::vector<double> s(static_cast<size_t>(H));
  for (int64_t j = 0; j < H; ++j) s[j] = std::max(std::pow(x[j], alpha) / std::pow(wmax[j], 1.0 - alpha), 1e-5);
  for (int64_t j = 0; j < H; ++j) {
    gamma.data[j] = static_cast<float>(gamma.data[j] / s[j]);
    if (beta) beta->data[j] = static_cast<float>(beta->data[j] / s[j]);
  }
  for (HostTensor* g : gemms) {
    const int64_t cols = g->shape.back();
    for (int64_t j = 0; j < H; ++j)
      for (int64_t c = 0; c < cols; ++c) g->data[j * cols + c] = static_cast<float>(g->data[j * cols + c] * s[j]);
  }
  return s;
}

}  // namespace

int64_t smooth_model(HostModel& model, std::map<std::string, QuantRange>& ranges, double alpha) {
  const ModelConfig& cfg = model.cfg;
  if (cfg.norm == NormPlacement::kPost) return 0;  // see smoothing.h: nothing can absorb s exactly
  int64_t smoothed = 0;
  auto range = [&](const std::string& key) -> QuantRange& {
    auto it = ranges.find(key);
    FTX_CHECK(it != ranges.end(), "", "no activation ranges for " + key);
    return it->second;
  };
  for (int64_t l = 0; l < cfg.num_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string qkv = p + "attention.query_key_value", fc1 = p + "mlp.dense_h_to_4h";
    auto beta_of = [&](const std::string& n) { return model.has(n) ? &model.at(n) : nullptr; };
    std::vector<HostTensor*> ffn = {&model.at(fc1 + ".weight")};
    std::vector<std::string> ffn_keys = {fc1};
    if (model.has(fc1 + ".gate.weight")) {
      ffn.push_back(&model.at(fc1 + ".gate.weight"));
      // The gate's own ranges are updated too when calibration recorded them (W8A8 quantises it).
      if (ranges.count(fc1 + ".gate")) ffn_keys.push_back(fc1 + ".gate");
    }
    struct Group {
      std::vector<HostTensor*> gemms;
      std::vector<std::string> keys;
      std::string ln;
    };
    std::vector<Group> groups;
    if (cfg.parallel_residual && cfg.shared_input_norm) {
      Group g{{&model.at(qkv + ".weight")}, {qkv}, p + "input_layernorm"};
      g.keys.insert(g.keys.end(), ffn_keys.begin(), ffn_keys.end());
      g.gemms.insert(g.gemms.end(), ffn.begin(), ffn.end());
      groups.push_back(g);
    } else {
      groups.push_back({{&model.at(qkv + ".weight")}, {qkv}, p + "input_layernorm"});
      groups.push_back({ffn, ffn_keys, p + "post_attention_layernorm"});
    }
    for (const Group& g : groups) {
      std::vector<double> x = range(g.keys[0]).x;
      for (size_t k = 1; k < g.keys.size(); ++k) {
        const auto& other = range(g.keys[k]).x;
        for (size_t j = 0; j < x.size(); ++j) x[j] = std::max(x[j], other[j]);
      }
      const std::vector<double> s =
          smooth_group(g.gemms, model.at(g.ln + ".weight"), beta_of(g.ln + ".bias"), x, alpha);
      for (const std::string& key : g.keys) {
        QuantRange& r = range(key);
        for (size_t j = 0; j < r.x.size(); ++j) r.x[j] /= s[j];
        r.w = abs_max_columns(model.at(key + ".weight"));
        ++smoothed;
      }
    }
  }
  return smoothed;
}

}  // namespace ftx::quant
