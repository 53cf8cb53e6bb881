#include "lib/quant/act_ranges.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/output_file.h"
#include "lib/model/ft_weight_layout.h"

namespace ftx::quant {

const std::vector<std::string>& gemm_suffixes() {
  static const std::vector<std::string> s = {"attention.query_key_value", "attention.dense", "mlp.dense_h_to_4h",
                                             "mlp.dense_4h_to_h"};
  return s;
}

std::vector<std::string> quantized_gemms(const ModelConfig& cfg) {
  std::vector<std::string> g = gemm_suffixes();
  if (cfg.activation.is_gated()) g.push_back("mlp.dense_h_to_4h.gate");
  return g;
}

std::string gemm_key(int64_t layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

void ActRanges::save(const std::string& path, bool force) const {
  nlohmann::json g = nlohmann::json::object();
  for (const auto& gr : gemms) g[gr.first] = {{"x", gr.second.x}, {"y", gr.second.y}, {"w", gr.second.w}};
  nlohmann::json k = nlohmann::json::object();
  for (const auto& kv_range : kv) k[kv_range.first] = {{"k", kv_range.second.k}, {"v", kv_range.second.v}};
  const nlohmann::json j = {{"format", "ftx-act-ranges-1"}, {"samples", samples}, {"gemms", g}, {"kv", k}};
  write_output_file(path, j.dump() + "\n", force);
}

ActRanges ActRanges::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path, "cannot open activation ranges");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "ftx-act-ranges-1" || !j.contains("gemms") || !j["gemms"].is_object())
    throw Error(path, "not an ftx activation-ranges file (written by `ftx smoothquant --save-act-ranges`)");
  ActRanges r;
  r.samples = j.value("samples", int64_t{0});
  for (auto it = j["gemms"].begin(); it != j["gemms"].end(); ++it) {
    GemmRange g;
    try {
      g.x = it.value().at("x").get<std::vector<float>>();
      g.y = it.value().at("y").get<std::vector<float>>();
      g.w = it.value().at("w").get<std::vector<float>>();
    } catch (const std::exception& e) {
      throw Error(path, "gemm " + it.key() + ": " + e.what());
    }
    r.gemms[it.key()] = std::move(g);
  }
  if (j.contains("kv")) {
    if (!j["kv"].is_object()) throw Error(path, "\"kv\" is not an object of per-layer K/V ranges");
    for (auto it = j["kv"].begin(); it != j["kv"].end(); ++it) {
      try {
        r.kv[it.key()] = KvRange{it.value().at("k").get<float>(), it.value().at("v").get<float>()};
      } catch (const std::exception& e) {
        throw Error(path, "kv " + it.key() + ": " + e.what());
      }
    }
  }
  return r;
}

}  // namespace ftx::quant
