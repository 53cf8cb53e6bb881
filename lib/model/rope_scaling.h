#pragma once
// Rotary position embedding frequencies: the plain ones, base^(-2i/rot_dim) for pair i, and the
// scaled variants HuggingFace checkpoints name in rope_scaling / rope_parameters, as transformers
// 5.23 computes them (modeling_rope_utils.py, _compute_<type>_parameters):
//   linear  (position interpolation): every frequency divided by `factor`;
//   llama3  (Llama 3.1 / 3.2): with L = original_max_position_embeddings and wavelength
//           w = 2π/f of frequency f, f/factor where w > L/low_freq_factor, f where
//           w < L/high_freq_factor, and between them (1 - s)·f/factor + s·f with
//           s = (L/w - low_freq_factor) / (high_freq_factor - low_freq_factor)
//           (Meta's apply_scaling in llama-models; transformers' _compute_llama3_parameters);
//   yarn    (Qwen3, DeepSeek): pair i blends f/factor and f with the ramp
//           r_i = clamp((i - low) / (high - low), 0, 1) as f/factor·r_i + f·(1 - r_i), where low and
//           high are the dimensions at which beta_fast and beta_slow rotations fit in L,
//           d(b) = rot_dim·ln(L / (2π·b)) / (2 ln base) (floored / ceiled when truncate), clamped to
//           [0, rot_dim - 1];
//   longrope (Phi-3, Phi-4-mini): f / short_factor[i]. transformers switches to long_factor once
//           a sequence passes original_max_position_embeddings (and keeps the keys it cached with
//           the short one); ftx uses short_factor only and refuses longer requests
//           (rope_beyond_original).
// linear and llama3 change only the frequencies. yarn and longrope also scale cos and sin by an
// attention factor (rope_attention_factor): the rotated dims of Q and K grow by it, so their dot
// product grows by its square, and with partial rotary the unrotated dims do not, so it cannot be
// folded into the attention scale. None of them changes with the sequence length in ftx.
// Both the CPU backend and the CUDA backend take their angles from rope_inv_freq and their
// magnitude from rope_attention_factor (RotaryFrequencies, lib/ops/op_types.h), so the two agree.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ftx {

enum class RopeScalingType { kNone, kLinear, kLlama3, kYarn, kLongrope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                          // linear, llama3, yarn; longrope: only for the attention factor
  double low_freq_factor = 1.0;                 // llama3
  double high_freq_factor = 4.0;                // llama3
  int64_t original_max_position_embeddings = 0; // llama3, yarn, longrope (L)
  double beta_fast = 32.0;                      // yarn
  double beta_slow = 1.0;                       // yarn
  double mscale = 0.0;                          // yarn; 0: absent (transformers tests `mscale and mscale_all_dim`)
  double mscale_all_dim = 0.0;                  // yarn; 0: absent
  bool truncate = true;                         // yarn
  std::optional<double> attention_factor;       // yarn, longrope; absent: derived (rope_attention_factor)
  std::vector<double> short_factor;             // longrope: rot_dim/2 divisors
  std::vector<double> long_factor;              // longrope: kept for the record (ftx does not use it)
  static RopeScaling linear(double factor) {
    RopeScaling s;
    s.type = RopeScalingType::kLinear;
    s.factor = factor;
    return s;
  }
  static RopeScaling llama3(double factor, double low, double high, int64_t original_max_positions) {
    RopeScaling s;
    s.type = RopeScalingType::kLlama3;
    s.factor = factor;
    s.low_freq_factor = low;
    s.high_freq_factor = high;
    s.original_max_position_embeddings = original_max_positions;
    return s;
  }
  // beta_fast/beta_slow/mscale/mscale_all_dim/truncate/attention_factor keep their defaults; set them after.
  static RopeScaling yarn(double factor, int64_t original_max_positions) {
    RopeScaling s;
    s.type = RopeScalingType::kYarn;
    s.factor = factor;
    s.original_max_position_embeddings = original_max_positions;
    return s;
  }
  // factor: transformers' rope_parameters.factor, or max_position_embeddings / original when absent
  // (it enters only the derived attention factor).
  static RopeScaling longrope(std::vector<double> short_factor, std::vector<double> long_factor,
                              int64_t original_max_positions, double factor) {
    RopeScaling s;
    s.type = RopeScalingType::kLongrope;
    s.factor = factor;
    s.original_max_position_embeddings = original_max_positions;
    s.short_factor = std::move(short_factor);
    s.long_factor = std::move(long_factor);
    return s;
  }
  bool operator==(const RopeScaling& o) const {
    return type == o.type && factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor &&
           original_max_position_embeddings == o.original_max_position_embeddings && beta_fast == o.beta_fast &&
           beta_slow == o.beta_slow && mscale == o.mscale && mscale_all_dim == o.mscale_all_dim &&
           truncate == o.truncate && attention_factor == o.attention_factor && short_factor == o.short_factor &&
           long_factor == o.long_factor;
  }
};

// The types converters read by default (a family that computes yarn or longrope names them; config.ini
// reads yarn too).
inline const std::vector<RopeScalingType>& rope_scalings_read() {
  static const std::vector<RopeScalingType> v = {RopeScalingType::kLinear, RopeScalingType::kLlama3};
  return v;
}

// "none", "linear", "llama3", "yarn", "longrope".
const char* rope_scaling_name(RopeScalingType t);
// The type named `name` ("default"/"none"/"": kNone) when it is one of `accepted`; otherwise
// Error(origin, "key = 'name' is not supported (supported: <accepted>)") (dynamic, su, a type of
// another family, ...): the type is what is refused, whatever fields come with it.
RopeScalingType rope_scaling_from_name(const std::string& name, const std::string& origin, const std::string& key,
                                       const std::vector<RopeScalingType>& accepted = rope_scalings_read());
// Error naming `origin` when a factor is not finite and positive, or a type's fields are
// inconsistent; with rot_dim > 0 also when longrope's factor lists do not hold rot_dim/2 numbers.
void check_rope_scaling(const RopeScaling& s, const std::string& origin, int64_t rot_dim = 0);

// The rot_dim/2 inverse frequencies (radians per position) of pairs i = 0 .. rot_dim/2 - 1, in double.
// Throws Error for longrope whose short_factor does not hold rot_dim/2 numbers.
std::vector<double> rope_inv_freq(int64_t rot_dim, double base, const RopeScaling& scaling);

// The factor cos and sin are multiplied by: 1 for none, linear and llama3; yarn and longrope's
// attention_factor when given, else derived as transformers does: yarn 0.1·ln(factor) + 1
// (1 for factor <= 1), or with mscale and mscale_all_dim both nonzero the ratio
// (0.1·mscale·ln(factor) + 1) / (0.1·mscale_all_dim·ln(factor) + 1); longrope
// sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) (1 for factor <= 1).
double rope_attention_factor(const RopeScaling& scaling);

// Whether a sequence of `length` positions (0 .. length-1) computes differently from what ftx does:
// longrope beyond original_max_position_embeddings (transformers switches to long_factor when the
// largest position + 1 exceeds it). Always false for the other types.
bool rope_beyond_original(const RopeScaling& scaling, int64_t length);
// "N positions exceed the longrope rotary's original_max_position_embeddings = L (config.ini
// rotary_scaling_original_max_positions): ...": for the caller that refuses such a request.
std::string rope_beyond_original_message(const RopeScaling& scaling, int64_t length);

}  // namespace ftx
