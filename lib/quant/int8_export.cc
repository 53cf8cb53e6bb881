#include "lib/quant/int8_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/error.h"
#include "lib/ops/backend.h"
#include "lib/quant/side_files.h"

namespace ftx::quant {

namespace {

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

std::vector<float> to_f32(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

int8_t to_i8(double v) { return static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.0, 127.0)); }

}  // namespace

std::vector<SideTensor> trtllm_int8_files(const HostModel& model, const std::map<std::string, QuantRange>& ranges,
                                          int64_t tp, DType storage, bool kv_only) {
  std::vector<SideTensor> out;
  for (int64_t l = 0; l < model.cfg.num_layer; ++l) {
    for (const std::string& suffix : gemm_suffixes()) {
      const std::string base = gemm_key(l, suffix);
      const bool qkv = suffix == "attention.query_key_value";
      if (kv_only && !qkv) continue;
      auto it = ranges.find(base);
      FTX_CHECK(it != ranges.end(), "", "no activation ranges for " + base);
      const QuantRange& rg = it->second;
      const double x_max = max_of(rg.x), y_max = max_of(rg.y);
      out.push_back(make_side_file(base + ".scale_y_quant_orig", -1, {1}, DType::kFloat32,
                                   std::vector<float>{static_cast<float>(y_max / 127.0)}));
      if (kv_only) continue;

      const HostTensor& w = model.at(base + ".weight");
      const int64_t rows = w.shape.front(), cols = w.numel() / rows;
      const int64_t segs = qkv ? 3 : 1, seg = cols / segs;
      FTX_CHECK(static_cast<int64_t>(rg.w.size()) == cols, "", "activation ranges of " + base + " do not fit the weight");
      const std::vector<float> stored = stored_values(w, storage);
      std::vector<double> sw_t(static_cast<size_t>(segs)), sw_c(static_cast<size_t>(cols));
      for (int64_t s = 0; s < segs; ++s)
        sw_t[s] = 127.0 / *std::max_element(rg.w.begin() + s * seg, rg.w.begin() + (s + 1) * seg);
      for (int64_t j = 0; j < cols; ++j) sw_c[j] = 127.0 / rg.w[j];
      const double sx = 127.0 / x_max, sy = 127.0 / y_max;
      std::vector<int8_t> q_t(stored.size()), q_c(stored.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const double v = stored[i * cols + j];
          q_t[i * cols + j] = to_i8(v * sw_t[j / seg]);
          q_c[i * cols + j] = to_i8(v * sw_c[j]);
        }
      std::vector<double> w_qo_c(static_cast<size_t>(cols)), acc_c(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) {
        w_qo_c[j] = 1.0 / sw_c[j];
        acc_c[j] = sy / (sx * sw_c[j]);
      }
      // Per-tensor w and accumulation scales: one value, or for QKV Q/K/V's broadcast to [3, H].
      std::vector<double> w_qo_t, acc_t;
      for (int64_t j = 0; j < (qkv ? cols : 1); ++j) {
        w_qo_t.push_back(1.0 / sw_t[j / seg]);
        acc_t.push_back(sy / (sx * sw_t[j / seg]));
      }
      const std::vector<int64_t> t_shape = qkv ? std::vector<int64_t>{3, seg} : std::vector<int64_t>{1};
      const bool by_rows = ft_split_of(base + ".weight") == OutSplit::kRow;
      for (int64_t r = 0; r < tp; ++r) {
        const std::vector<int64_t> shape = by_rows ? std::vector<int64_t>{rows / tp, cols}
                                                   : std::vector<int64_t>{rows, cols / tp};
        out.push_back(make_side_file(base + ".weight.int8", r, shape, DType::kInt8,
                                     split_part(q_t, rows, cols, by_rows, segs, tp, r)));
        out.push_back(make_side_file(base + ".weight.int8.col", r, shape, DType::kInt8,
                                     split_part(q_c, rows, cols, by_rows, segs, tp, r)));
        if (!by_rows) {
          const std::vector<int64_t> cs = qkv ? std::vector<int64_t>{3, seg / tp} : std::vector<int64_t>{cols / tp};
          out.push_back(make_side_file(base + ".scale_w_quant_orig.col", r, cs, DType::kFloat32,
                                       split_part(to_f32(w_qo_c), 1, cols, false, segs, tp, r)));
          out.push_back(make_side_file(base + ".scale_y_accum_quant.col", r, cs, DType::kFloat32,
                                       split_part(to_f32(acc_c), 1, cols, false, segs, tp, r)));
        }
      }
      out.push_back(make_side_file(base + ".scale_x_orig_quant", -1, {1}, DType::kFloat32,
                                   std::vector<float>{static_cast<float>(sx)}));
      out.push_back(make_side_file(base + ".scale_w_quant_orig", -1, t_shape, DType::kFloat32, to_f32(w_qo_t)));
      out.push_back(make_side_file(base + ".scale_y_accum_quant", -1, t_shape, DType::kFloat32, to_f32(acc_t)));
      if (by_rows) {
        out.push_back(make_side_file(base + ".scale_w_quant_orig.col", -1, {cols}, DType::kFloat32, to_f32(w_qo_c)));
        out.push_back(make_side_file(base + ".scale_y_accum_quant.col", -1, {cols}, DType::kFloat32, to_f32(acc_c)));
      }
    }
  }
  return out;
}

std::vector<SideTensor> ft_int8_files(const HostModel& model, const std::map<std::string, QuantRange>& ranges,
                                      int64_t tp, DType storage) {
  std::vector<SideTensor> out;
  for (int64_t l = 0; l < model.cfg.num_layer; ++l) {
    for (const std::string& suffix : gemm_suffixes()) {
      const std::string base = gemm_key(l, suffix);
      const bool qkv = suffix == "attention.query_key_value";
      auto it = ranges.find(base);
      FTX_CHECK(it != ranges.end(), "", "no activation ranges for " + base);
      const QuantRange& rg = it->second;
      const HostTensor& w = model.at(base + ".weight");
      const int64_t rows = w.shape.front(), cols = w.numel() / rows;
      const int64_t segs = qkv ? 3 : 1, seg = cols / segs;
      const std::vector<float> stored = stored_values(w, storage);
      std::vector<double> s_w(static_cast<size_t>(segs), 1e-8), s_y(static_cast<size_t>(segs), 0.0);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) s_w[j / seg] = std::max(s_w[j / seg], std::fabs(double{stored[i * cols + j]}));
      for (int64_t j = 0; j < cols; ++j) s_y[j / seg] = std::max(s_y[j / seg], rg.y[j]);
      const double s_x = 127.0 / max_of(rg.x);
      for (int64_t k = 0; k < segs; ++k) {
        s_w[k] = 127.0 / s_w[k];
        s_y[k] = 127.0 / s_y[k];
      }
      std::vector<int8_t> q(stored.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) q[i * cols + j] = to_i8(stored[i * cols + j] * s_w[j / seg]);
      const bool by_rows = ft_split_of(base + ".weight") == OutSplit::kRow;
      for (int64_t r = 0; r < tp; ++r) {
        const std::vector<int64_t> shape = by_rows ? std::vector<int64_t>{rows / tp, cols}
                                                   : std::vector<int64_t>{rows, cols / tp};
        out.push_back(make_side_file(base + ".weight.int8", r, shape, DType::kInt8,
                                     split_part(q, rows, cols, by_rows, segs, tp, r)));
      }
      std::vector<double> scale(static_cast<size_t>(segs), s_x), inter, scale_out;
      for (int64_t k = 0; k < segs; ++k) {
        scale_out.push_back(1.0 / s_y[k]);
        for (int64_t j = 0; j < (qkv ? seg / tp : 1); ++j) inter.push_back(s_y[k] / (s_x * s_w[k]));
      }
      const std::vector<int64_t> n3 = {segs};
      out.push_back(make_side_file(base + ".scale", -1, n3, DType::kFloat32, to_f32(scale)));
      out.push_back(make_side_file(base + ".scale_inter", -1, qkv ? std::vector<int64_t>{3, seg / tp} : n3,
                                   DType::kFloat32, to_f32(inter)));
      out.push_back(make_side_file(base + ".scale_out", -1, n3, DType::kFloat32, to_f32(scale_out)));
    }
  }
  return out;
}

}  // namespace ftx::quant
