#include "lib/model/rope_scaling.h"

#include <algorithm>
#include <cmath>

#include "formats/error.h"

namespace ftx {

namespace {

constexpr double kPi = 3.14159265358979323846264338327950288;

// transformers' find_correction_dim: the dimension at which `rotations` turns fit in L positions.
double yarn_correction_dim(double rotations, double dim, double base, double L) {
  return (dim * std::log(L / (rotations * 2 * kPi))) / (2 * std::log(base));
}

// The blend of yarn: f/factor·r_i + f·(1 - r_i), written as transformers 5.23 writes it (same
// operations in the same order, in double where it uses float32) so that the two agree to rounding.
void yarn_inv_freq(std::vector<double>& f, int64_t rot_dim, double base, const RopeScaling& s) {
  const double dim = static_cast<double>(rot_dim), L = static_cast<double>(s.original_max_position_embeddings);
  double low = yarn_correction_dim(s.beta_fast, dim, base, L);
  double high = yarn_correction_dim(s.beta_slow, dim, base, L);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // transformers: "prevent singularity"
  for (size_t i = 0; i < f.size(); ++i) {
    const double pos_freq = std::pow(base, static_cast<double>(2 * i) / dim);
    const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (s.factor * pos_freq);
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = 1 - ramp;
    f[i] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
}

bool finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x) && x > 0; });
}

}  // namespace

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLongrope: return "longrope";
    case RopeScalingType::kNone: break;
  }
  return "none";
}

RopeScalingType rope_scaling_from_name(const std::string& name, const std::string& origin, const std::string& key,
                                       const std::vector<RopeScalingType>& accepted) {
  if (name == "none" || name == "default" || name.empty()) return RopeScalingType::kNone;
  std::string list;
  for (RopeScalingType t : accepted) {
    if (name == rope_scaling_name(t)) return t;
    list += (list.empty() ? "" : ", ") + std::string(rope_scaling_name(t));
  }
  throw Error(origin, key + " = '" + name + "' is not supported (supported: " + list + ")");
}

void check_rope_scaling(const RopeScaling& s, const std::string& origin, int64_t rot_dim) {
  if (s.type == RopeScalingType::kNone) return;
  const std::string what = std::string("rope scaling ") + rope_scaling_name(s.type) + ": ";
  FTX_CHECK(std::isfinite(s.factor) && s.factor > 0, origin, what + "factor must be a positive number");
  if (s.type == RopeScalingType::kLinear) return;
  FTX_CHECK(s.original_max_position_embeddings > 0, origin,
            what + "original_max_position_embeddings must be a positive integer");
  if (s.type == RopeScalingType::kLlama3) {
    FTX_CHECK(std::isfinite(s.low_freq_factor) && std::isfinite(s.high_freq_factor) && s.low_freq_factor > 0 &&
                  s.high_freq_factor > s.low_freq_factor,
              origin, what + "needs 0 < low_freq_factor < high_freq_factor");
    return;
  }
  FTX_CHECK(!s.attention_factor || (std::isfinite(*s.attention_factor) && *s.attention_factor > 0), origin,
            what + "attention_factor must be a positive number");
  if (s.type == RopeScalingType::kYarn) {
    FTX_CHECK(std::isfinite(s.beta_fast) && std::isfinite(s.beta_slow) && s.beta_fast > 0 && s.beta_slow > 0, origin,
              what + "beta_fast and beta_slow must be positive numbers");
    FTX_CHECK(std::isfinite(s.mscale) && std::isfinite(s.mscale_all_dim), origin,
              what + "mscale and mscale_all_dim must be numbers");
    return;
  }
  FTX_CHECK(!s.short_factor.empty() && finite(s.short_factor) && finite(s.long_factor), origin,
            what + "short_factor and long_factor must be lists of positive numbers");
  if (rot_dim <= 0) return;
  const size_t pairs = static_cast<size_t>(rot_dim / 2);
  FTX_CHECK(s.short_factor.size() == pairs && (s.long_factor.empty() || s.long_factor.size() == pairs), origin,
            what + "short_factor and long_factor must hold " + std::to_string(pairs) + " numbers (rotary dims " +
                std::to_string(rot_dim) + " / 2), not " + std::to_string(s.short_factor.size()) + " and " +
                std::to_string(s.long_factor.size()));
}

std::vector<double> rope_inv_freq(int64_t rot_dim, double base, const RopeScaling& s) {
  const int64_t pairs = rot_dim / 2;
  std::vector<double> f(static_cast<size_t>(pairs > 0 ? pairs : 0));
  if (s.type == RopeScalingType::kYarn) {
    yarn_inv_freq(f, rot_dim, base, s);
    return f;
  }
  if (s.type == RopeScalingType::kLongrope && s.short_factor.size() != f.size())
    throw Error("rope scaling longrope: short_factor holds " + std::to_string(s.short_factor.size()) +
                " numbers where rotary dims " + std::to_string(rot_dim) + " need " + std::to_string(f.size()));
  const double kTwoPi = 2 * kPi;
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
    } else if (s.type == RopeScalingType::kLongrope) {
      // transformers: 1 / (ext_factors · base^(2i/dim))
      x = 1.0 / (s.short_factor[static_cast<size_t>(i)] *
                 std::pow(base, static_cast<double>(2 * i) / static_cast<double>(rot_dim)));
    }
    f[static_cast<size_t>(i)] = x;
  }
  return f;
}

double rope_attention_factor(const RopeScaling& s) {
  if (s.type != RopeScalingType::kYarn && s.type != RopeScalingType::kLongrope) return 1.0;
  if (s.attention_factor) return *s.attention_factor;
  if (s.factor <= 1) return 1.0;
  if (s.type == RopeScalingType::kLongrope)
    return std::sqrt(1 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position_embeddings)));
  auto mscale_of = [&](double m) { return 0.1 * m * std::log(s.factor) + 1.0; };  // transformers' get_mscale
  if (s.mscale != 0 && s.mscale_all_dim != 0) return mscale_of(s.mscale) / mscale_of(s.mscale_all_dim);
  return mscale_of(1.0);
}

bool rope_beyond_original(const RopeScaling& s, int64_t length) {
  return s.type == RopeScalingType::kLongrope && length > s.original_max_position_embeddings;
}

std::string rope_beyond_original_message(const RopeScaling& s, int64_t length) {
  const std::string L = std::to_string(s.original_max_position_embeddings);
  return "a sequence of " + std::to_string(length) + " positions is longer than the longrope rotary's " +
         "original_max_position_embeddings = " + L + " (config.ini rotary_scaling_original_max_positions), beyond " +
         "which the model rotates by long_factor, which ftx does not compute; keep prompt + new tokens within " + L;
}

}  // namespace ftx
