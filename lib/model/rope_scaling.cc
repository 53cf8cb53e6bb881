#include "lib/model/rope_scaling.h"

#include <cmath>

#include "formats/error.h"

namespace ftx {

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kNone: break;
  }
  return "none";
}

RopeScalingType rope_scaling_from_name(const std::string& name, const std::string& origin, const std::string& key) {
  if (name == "none" || name == "default" || name.empty()) return RopeScalingType::kNone;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "llama3") return RopeScalingType::kLlama3;
  throw Error(origin, key + " = '" + name + "' is not supported (supported: linear, llama3)");
}

void check_rope_scaling(const RopeScaling& s, const std::string& origin) {
  if (s.type == RopeScalingType::kNone) return;
  const std::string what = std::string("rope scaling ") + rope_scaling_name(s.type) + ": ";
  FTX_CHECK(std::isfinite(s.factor) && s.factor > 0, origin, what + "factor must be a positive number");
  if (s.type != RopeScalingType::kLlama3) return;
  FTX_CHECK(std::isfinite(s.low_freq_factor) && std::isfinite(s.high_freq_factor) && s.low_freq_factor > 0 &&
                s.high_freq_factor > s.low_freq_factor,
            origin, what + "needs 0 < low_freq_factor < high_freq_factor");
  FTX_CHECK(s.original_max_position_embeddings > 0, origin,
            what + "original_max_position_embeddings must be a positive integer");
}

std::vector<double> rope_inv_freq(int64_t rot_dim, double base, const RopeScaling& s) {
  const int64_t pairs = rot_dim / 2;
  std::vector<double> f(static_cast<size_t>(pairs > 0 ? pairs : 0));
  const double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < pairs; ++i) {
    double x = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dim));
    if (s.type == RopeScalingType::kLinear) {
      x /= s.factor;
    } else if (s.type == RopeScalingType::kLlama3) {
      const double L = static_cast<double>(s.original_max_position_embeddings);
      const double wavelen = kTwoPi / x;
      if (wavelen > L / s.low_freq_factor) {
        x /= s.factor;  // low frequencies: interpolated
      } else if (!(wavelen < L / s.high_freq_factor)) {
        const double smooth = (L / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1.0 - smooth) * x / s.factor + smooth * x;  // between: blended
      }  // high frequencies: kept
    }
    f[static_cast<size_t>(i)] = x;
  }
  return f;
}

}  // namespace ftx
