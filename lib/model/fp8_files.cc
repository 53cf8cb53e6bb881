#include "lib/model/fp8_files.h"

#include <algorithm>

namespace ftx {

std::string fp8_weight_name(const std::string& gemm) { return gemm + ".weight.fp8"; }
std::string fp8_weight_scale_name(const std::string& gemm) { return gemm + ".weights_scaling_factor"; }
std::string fp8_act_scale_name(const std::string& gemm) { return gemm + ".activation_scaling_factor"; }
std::string fp8_kv_scale_name(int64_t layer) {
  return "model.layers." + std::to_string(layer) + ".attention.kv_cache_scaling_factor";
}

bool is_fp8_side_file(const std::string& f) {
  auto ends_with = [&](const std::string& s) {
    return f.size() >= s.size() && f.compare(f.size() - s.size(), s.size(), s) == 0;
  };
  if (f.rfind("model.layers.", 0) != 0 || !ends_with(".bin")) return false;
  if (ends_with(".weights_scaling_factor.bin") || ends_with(".activation_scaling_factor.bin") ||
      ends_with(".attention.kv_cache_scaling_factor.bin"))
    return true;
  // <gemm>.weight.fp8.R.bin
  const size_t at = f.rfind(".weight.fp8.");
  if (at == std::string::npos) return false;
  const std::string rank = f.substr(at + 12, f.size() - 4 - (at + 12));
  return !rank.empty() && std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace ftx
