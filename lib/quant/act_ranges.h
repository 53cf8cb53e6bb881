#pragma once
// Activation ranges of SmoothQuant calibration, per GEMM of every layer, as TensorRT-LLM's
// capture_activation_range records them: "x" max |input| per input channel,
// "y" max |output| per output column, "w" max |W| per output column (clipped at 1e-8). Keys are the
// FT names of the GEMMs: model.layers.L.{attention.query_key_value, attention.dense,
// mlp.dense_h_to_4h, mlp.dense_4h_to_h}. Saved and read as JSON (--save-act-ranges, --act-ranges).
// Besides them, per layer, max |K| and max |V| as the KV cache stores them (after rotary): the FP8
// KV-cache scale (fp8_export.h); a file from before they were recorded has none.
#include <map>
#include <string>
#include <vector>

#include "lib/model/model_config.h"

namespace ftx::quant {

struct GemmRange {
  std::vector<float> x, y, w;
};

// The four GEMMs of a layer, in forward order, by their FT name (without ".weight").
const std::vector<std::string>& gemm_suffixes();
// The GEMMs `ftx smoothquant` quantises in a layer of `cfg`: the four, and a gated FFN's gate
// projection (mlp.dense_h_to_4h.gate, which reads FC1's input).
std::vector<std::string> quantized_gemms(const ModelConfig& cfg);
std::string gemm_key(int64_t layer, const std::string& suffix);  // "model.layers.L.<suffix>"

// max |K|, max |V| of one layer over the calibration tokens.
struct KvRange {
  float k = 0.0f, v = 0.0f;
};

struct ActRanges {
  std::map<std::string, GemmRange> gemms;
  std::map<std::string, KvRange> kv;  // "model.layers.L.attention" -> its K and V ranges
  int64_t samples = 0;  // calibration samples they were recorded over

  // {"format": "ftx-act-ranges-1", "samples": n, "gemms": {key: {"x": [...], "y": [...], "w": [...]}},
  //  "kv": {"model.layers.L.attention": {"k": ..., "v": ...}}};
  // floats are written so that they read back bit-exact.
  void save(const std::string& path, bool force) const;
  // Error naming the file for bad JSON or a missing key.
  static ActRanges load(const std::string& path);
};

}  // namespace ftx::quant
