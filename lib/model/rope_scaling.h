#pragma once
// Rotary position embedding frequencies: the plain ones, base^(-2i/rot_dim) for pair i, and the
// scaled variants HuggingFace checkpoints name in rope_scaling / rope_parameters that change only
// the frequencies (not the cos/sin magnitudes, not with the sequence length):
//   linear  (position interpolation): every frequency divided by `factor`;
//   llama3  (Llama 3.1 / 3.2): with L = original_max_position_embeddings and wavelength
//           w = 2π/f of frequency f, f/factor where w > L/low_freq_factor, f where
//           w < L/high_freq_factor, and between them (1 - s)·f/factor + s·f with
//           s = (L/w - low_freq_factor) / (high_freq_factor - low_freq_factor)
//           (Meta's apply_scaling in llama-models; transformers' _compute_llama3_parameters).
// Both the CPU backend and the CUDA backend take their angles from rope_inv_freq, so the two agree.
#include <cstdint>
#include <string>
#include <vector>

namespace ftx {

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                 // llama3
  double high_freq_factor = 4.0;                // llama3
  int64_t original_max_position_embeddings = 0; // llama3 (L)
  static RopeScaling linear(double factor) { return {RopeScalingType::kLinear, factor, 1.0, 4.0, 0}; }
  static RopeScaling llama3(double factor, double low, double high, int64_t original_max_positions) {
    return {RopeScalingType::kLlama3, factor, low, high, original_max_positions};
  }
  bool operator==(const RopeScaling& o) const {
    return type == o.type && factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor &&
           original_max_position_embeddings == o.original_max_position_embeddings;
  }
};

// "none", "linear", "llama3".
const char* rope_scaling_name(RopeScalingType t);
// Error(origin, "key = 'name' is not supported (supported: linear, llama3)") for any other name
// (dynamic, yarn, longrope, su, ...): the type is what ftx lacks, whatever fields come with it.
RopeScalingType rope_scaling_from_name(const std::string& name, const std::string& origin, const std::string& key);
// Error naming `origin` when a factor is not finite and positive, or llama3's fields are inconsistent.
void check_rope_scaling(const RopeScaling& s, const std::string& origin);

// The rot_dim/2 inverse frequencies (radians per position) of pairs i = 0 .. rot_dim/2 - 1, in double.
std::vector<double> rope_inv_freq(int64_t rot_dim, double base, const RopeScaling& scaling);

}  // namespace ftx
