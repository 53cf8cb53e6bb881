#include "lib/quant/fp8.h"

#include <algorithm>

namespace ftx::quant {

float fp8_scale_of(double amax) {
  // amax is an fp32 value (a largest |weight| or recorded activation), so the float64 quotient
  // rounded to fp32 is the fp32 division amax / 448.f exactly.
  return static_cast<float>(std::max(amax, 1e-8) / static_cast<double>(kE4M3Max));
}

void quantize_e4m3(const float* w, size_t n, float scale, uint8_t* q) {
#pragma omp parallel for if (n > 65536)
  for (size_t i = 0; i < n; ++i) q[i] = float_to_e4m3(w[i] / scale);
}

}  // namespace ftx::quant
