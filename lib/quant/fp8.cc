#include "lib/quant/fp8.h"

#include <algorithm>
#include <cmath>

#include "formats/error.h"

namespace ftx::quant {

E4M3Table::E4M3Table() {
  for (int q = 0; q < 256; ++q) {
    const int exp = (q >> 3) & 0xf, mant = q & 7;
    float v;
    if (exp == 0xf && mant == 7)
      v = NAN;
    else if (exp == 0)
      v = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant · 2^-9
    else
      v = std::ldexp(static_cast<float>(8 + mant), exp - 10);  // (1 + mant/8) · 2^(exp - 7)
    value[q] = (q & 0x80) ? -v : v;
  }
}

const E4M3Table kE4M3;

float fp8_scale_of(double amax) {
  // amax is an fp32 value (a largest |weight| or recorded activation), so the float64 quotient
  // rounded to fp32 is the fp32 division amax / 448.f exactly.
  return static_cast<float>(std::max(amax, 1e-8) / static_cast<double>(kE4M3Max));
}

void quantize_e4m3(const float* w, size_t n, float scale, uint8_t* q) {
#pragma omp parallel for if (n > 65536)
  for (size_t i = 0; i < n; ++i) q[i] = float_to_e4m3(w[i] / scale);
}

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

void require_fp8_device(const std::string& device_name, int sm_major, int sm_minor, const std::string& flag) {
  if (sm_major > 8 || (sm_major == 8 && sm_minor >= 9)) return;
  throw Error(device_name, flag + " needs FP8 tensor cores (compute capability 8.9 or 9.0 and up: Ada, Hopper); this GPU is " +
                               std::to_string(sm_major) + "." + std::to_string(sm_minor));
}

}  // namespace ftx::quant
