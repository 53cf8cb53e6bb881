#include "lib/quant/fp8_export.h"

#include <algorithm>
#include <cmath>

#include "formats/error.h"
#include "lib/quant/fp8.h"
#include "lib/quant/side_files.h"

namespace ftx::quant {

std::vector<SideTensor> trtllm_fp8_files(const HostModel& model, const std::map<std::string, QuantRange>& ranges,
                                         const std::map<std::string, KvRange>& kv, int64_t tp, DType storage,
                                         const std::string& origin) {
  std::vector<SideTensor> out;
  auto scale_file = [&](const std::string& name, float value) {
    out.push_back(make_side_file(name, -1, {1}, DType::kFloat32, std::vector<float>{value}));
  };
  for (int64_t l = 0; l < model.cfg.num_layer; ++l) {
    for (const std::string& suffix : quantized_gemms(model.cfg)) {
      const std::string base = gemm_key(l, suffix);
      const bool gate = suffix == "mlp.dense_h_to_4h.gate";
      const std::string input_of = gate ? gemm_key(l, "mlp.dense_h_to_4h") : base;  // the gate reads FC1's input
      auto it = ranges.find(input_of);
      FTX_CHECK(it != ranges.end(), origin, "no activation ranges for " + input_of);
      const double x_max = *std::max_element(it->second.x.begin(), it->second.x.end());

      const HostTensor& w = model.at(base + ".weight");
      const std::vector<float> stored = stored_values(w, storage);
      float w_max = 0.0f;
      for (float v : stored) w_max = std::max(w_max, std::fabs(v));
      const float s_w = fp8_scale_of(w_max);
      std::vector<uint8_t> q(stored.size());
      quantize_e4m3(stored.data(), stored.size(), s_w, q.data());

      const GemmSplit split = gemm_split(model, base);
      for (int64_t r = 0; r < tp; ++r)
        out.push_back(make_side_file(fp8_weight_name(base), r, split.rank_shape(tp), DType::kFloat8E4M3,
                                     split.part(q, tp, r)));
      scale_file(fp8_weight_scale_name(base), s_w);
      scale_file(fp8_act_scale_name(base), fp8_scale_of(x_max));
    }
    const std::string attn = gemm_key(l, "attention");
    auto k = kv.find(attn);
    FTX_CHECK(k != kv.end(), origin,
              "no K/V ranges for " + attn + " (activation ranges saved before FP8 existed: calibrate again)");
    scale_file(fp8_kv_scale_name(l), fp8_scale_of(std::max(k->second.k, k->second.v)));
  }
  return out;
}

}  // namespace ftx::quant
