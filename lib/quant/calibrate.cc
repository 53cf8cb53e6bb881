#include "lib/quant/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/runtime.h"
#include "lib/quant/recording_backend.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/progress.h"

namespace ftx::quant {

std::vector<std::vector<int32_t>> read_calibration_samples(const std::string& path, const Tokenizer* tokenizer,
                                                           int64_t max_samples, int64_t seq_len, int64_t vocab_size) {
  std::ifstream in(path);
  if (!in) throw Error(path, "cannot open calibration data");
  std::vector<std::vector<int32_t>> out;
  std::string line;
  int64_t lineno = 0;
  while (static_cast<int64_t>(out.size()) < max_samples && std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      throw Error(where, "not a JSON object (calibration lines are {\"text\": ...} or {\"ids\": [...]})");
    }
    std::vector<int32_t> ids;
    if (j.is_object() && j.contains("ids")) {
      try {
        ids = j["ids"].get<std::vector<int32_t>>();
      } catch (const std::exception&) {
        throw Error(where, "\"ids\" is not a list of token ids");
      }
    } else if (j.is_object() && j.contains("text") && j["text"].is_string()) {
      if (!tokenizer)
        throw Error(where, "a \"text\" sample needs the model's tokenizer, and the model folder has none (give --tokenizer or ids)");
      ids = tokenizer->encode(j["text"].get<std::string>());
    } else {
      throw Error(where, "neither \"text\" (a string) nor \"ids\"");
    }
    if (ids.empty()) throw Error(where, "sample has no tokens");
    for (int32_t id : ids)
      if (id < 0 || (vocab_size > 0 && id >= vocab_size))
        throw Error(where, "token id " + std::to_string(id) + " is outside the model's vocabulary [0, " +
                               std::to_string(vocab_size) + ")");
    if (static_cast<int64_t>(ids.size()) > seq_len) ids.resize(static_cast<size_t>(seq_len));
    out.push_back(std::move(ids));
  }
  if (out.empty()) throw Error(path, "no calibration samples (the file is empty)");
  return out;
}

std::vector<float> column_abs_max(const HostTensor& w, float floor) {
  const int64_t cols = w.shape.back(), rows = w.numel() / cols;
  std::vector<float> m(static_cast<size_t>(cols), floor);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[j] = std::max(m[j], std::fabs(w.data[i * cols + j]));
  return m;
}

ActRanges calibrate(const std::string& tp1_dir, const HostModel& model,
                    const std::vector<std::vector<int32_t>>& samples, const CalibrationOptions& options) {
  Runtime rt = make_runtime({options.device, options.threads, tp1_dir, "", DType::kFloat32});
  RecordingBackend rec(*rt.backend);
  dist::SingleRank comm;
  ModelWeights weights = ModelWeights::load(tp1_dir, 0, 1, rec);
  const ModelConfig& cfg = weights.config();
  FTX_CHECK(!cfg.is_moe(), tp1_dir + "/config.ini",
            "calibration of a mixture of experts (expert_num = " + std::to_string(cfg.expert_num) +
                ") is not supported yet: the experts' GEMMs run inside one op that records no ranges");
  auto bias_of = [&](const std::string& name) {
    return model.has(name) ? model.at(name).data : std::vector<float>{};
  };
  for (int64_t l = 0; l < cfg.num_layer; ++l) {
    const LayerWeights& lw = weights.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    rec.watch(lw.qkv_w, gemm_key(l, "attention.query_key_value"), bias_of(p + "attention.query_key_value.bias"));
    rec.watch(lw.dense_w, gemm_key(l, "attention.dense"), bias_of(p + "attention.dense.bias"));
    rec.watch(lw.fc_w, gemm_key(l, "mlp.dense_h_to_4h"), bias_of(p + "mlp.dense_h_to_4h.bias"));
    if (lw.gate_w)  // a gated FFN's second projection reads FC1's input
      rec.watch(lw.gate_w, gemm_key(l, "mlp.dense_h_to_4h.gate"), bias_of(p + "mlp.dense_h_to_4h.gate.bias"));
    // GPT-NeoX with parallel residual keeps one summed output bias (attention + MLP) for FC2.
    rec.watch(lw.proj_w, gemm_key(l, "mlp.dense_4h_to_h"),
              model.has(p + "mlp.attention.bias.sum") ? bias_of(p + "mlp.attention.bias.sum")
                                                      : bias_of(p + "mlp.dense_4h_to_h.bias"));
  }
  rec.record_kv(cfg.num_layer);
  int64_t longest = 0, tokens = 0;
  for (const auto& s : samples) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
    tokens += static_cast<int64_t>(s.size());
  }
  // Every token of every sample runs through the recorded GEMMs: no prefix is taken from the cache.
  EngineOptions eo;
  eo.prefix_cache = false;
  // A sliding-window model (Mistral) attends to the last sliding_window positions: a circular cache
  // of that length computes exactly that for samples longer than the window (generate would
  // refuse them without --memory-len; calibration says that it runs the model's own attention).
  eo.memory_len = cfg.sliding_window;
  if (cfg.sliding_window > 0 && longest > cfg.sliding_window && !options.quiet)
    std::fprintf(stderr,
                 "ftx smoothquant: calibration samples of up to %lld tokens attend over the model's sliding window "
                 "of %lld positions (config.ini sliding_window), as generate --memory-len %lld runs them\n",
                 static_cast<long long>(longest), static_cast<long long>(cfg.sliding_window),
                 static_cast<long long>(cfg.sliding_window));
  Engine engine(weights, rec, comm, eo);
  engine.reserve(1, longest, longest);
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  Progress progress("calibrate", samples.size(), 0, options.quiet, "samples (" + std::to_string(tokens) + " tokens)");
  for (const auto& s : samples) {
    engine.prefill({s}, {0}, logits.data());
    progress.advance(1, 0);
  }
  progress.finish();

  ActRanges r;
  r.samples = static_cast<int64_t>(samples.size());
  for (const auto& kv : rec.stats()) r.gemms[kv.first] = GemmRange{kv.second.x, kv.second.y, {}};
  for (auto& kv : r.gemms) kv.second.w = column_abs_max(model.at(kv.first + ".weight"), 1e-8f);
  for (size_t l = 0; l < rec.kv_stats().size(); ++l)
    r.kv[gemm_key(static_cast<int64_t>(l), "attention")] = KvRange{rec.kv_stats()[l].first, rec.kv_stats()[l].second};
  return r;
}

}  // namespace ftx::quant
