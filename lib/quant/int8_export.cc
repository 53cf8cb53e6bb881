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
    for (const std::string& suffix : quantized_gemms(model.cfg)) {
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
      const GemmSplit split = gemm_split(model, base);
      const int64_t rows = split.rows, cols = split.cols;
      FTX_CHECK(static_cast<int64_t>(rg.w.size()) == cols, "", "activation ranges of " + base + " do not fit the weight");
      // "Per tensor" is per Q, K and V for QKV (TensorRT-LLM's generate_int8): the segment of each column.
      std::vector<int64_t> seg_of(static_cast<size_t>(cols), 0);
      std::vector<double> sw_t(1, 0.0);
      if (qkv) {
        sw_t.assign(3, 0.0);
        int64_t j = 0, k = 0;
        for (const ColumnSegment& s : qkv_column_segments(model.cfg)) {
          for (int64_t e = j + s.width; j < e; ++j) seg_of[j] = k;
          ++k;
        }
      }
      for (int64_t j = 0; j < cols; ++j) sw_t[seg_of[j]] = std::max(sw_t[seg_of[j]], rg.w[j]);
      for (double& v : sw_t) v = 127.0 / v;
      std::vector<double> sw_c(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) sw_c[j] = 127.0 / rg.w[j];
      const double sx = 127.0 / x_max, sy = 127.0 / y_max;
      const std::vector<float> stored = stored_values(w, storage);
      std::vector<int8_t> q_t(stored.size()), q_c(stored.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const double v = stored[i * cols + j];
          q_t[i * cols + j] = to_i8(v * sw_t[seg_of[j]]);
          q_c[i * cols + j] = to_i8(v * sw_c[j]);
        }
      std::vector<double> w_qo_c(static_cast<size_t>(cols)), acc_c(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) {
        w_qo_c[j] = 1.0 / sw_c[j];
        acc_c[j] = sy / (sx * sw_c[j]);
      }
      // Per-tensor w and accumulation scales: one value, or for QKV one per column (Q's, K's and
      // V's value broadcast over its columns; multi-head: as [3, H]).
      std::vector<double> w_qo_t, acc_t;
      for (int64_t j = 0; j < (qkv ? cols : 1); ++j) {
        w_qo_t.push_back(1.0 / sw_t[seg_of[j]]);
        acc_t.push_back(sy / (sx * sw_t[seg_of[j]]));
      }
      const bool mha = qkv && qkv_column_segments(model.cfg)[1].width * 3 == cols;  // [3, H] as before GQA
      const std::vector<int64_t> t_shape = mha   ? std::vector<int64_t>{3, cols / 3}
                                           : qkv ? std::vector<int64_t>{cols}
                                                 : std::vector<int64_t>{1};
      for (int64_t r = 0; r < tp; ++r) {
        const std::vector<int64_t> shape = split.rank_shape(tp);
        out.push_back(make_side_file(base + ".weight.int8", r, shape, DType::kInt8, split.part(q_t, tp, r)));
        out.push_back(make_side_file(base + ".weight.int8.col", r, shape, DType::kInt8, split.part(q_c, tp, r)));
        if (!split.by_rows) {
          const int64_t local = rank_columns(split.segs, tp);
          const std::vector<int64_t> cs = mha ? std::vector<int64_t>{3, local / 3} : std::vector<int64_t>{local};
          out.push_back(make_side_file(base + ".scale_w_quant_orig.col", r, cs, DType::kFloat32,
                                       split.column_part(to_f32(w_qo_c), tp, r)));
          out.push_back(make_side_file(base + ".scale_y_accum_quant.col", r, cs, DType::kFloat32,
                                       split.column_part(to_f32(acc_c), tp, r)));
        }
      }
      out.push_back(make_side_file(base + ".scale_x_orig_quant", -1, {1}, DType::kFloat32,
                                   std::vector<float>{static_cast<float>(sx)}));
      out.push_back(make_side_file(base + ".scale_w_quant_orig", -1, t_shape, DType::kFloat32, to_f32(w_qo_t)));
      out.push_back(make_side_file(base + ".scale_y_accum_quant", -1, t_shape, DType::kFloat32, to_f32(acc_t)));
      if (split.by_rows) {
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
      const GemmSplit split = gemm_split(model, base);
      for (int64_t r = 0; r < tp; ++r)
        out.push_back(make_side_file(base + ".weight.int8", r, split.rank_shape(tp), DType::kInt8, split.part(q, tp, r)));
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
