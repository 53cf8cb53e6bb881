#include "lib/quant/fp8.h"

#include <algorithm>

#include "formats/error.h"

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

void require_fp8_device(const std::string& device_name, int sm_major, int sm_minor, const std::string& flag) {
  if (sm_major > 8 || (sm_major == 8 && sm_minor >= 9)) return;
  throw Error(device_name, flag + " needs FP8 tensor cores (compute capability 8.9 or 9.0 and up: Ada, Hopper); this GPU is " +
                               std::to_string(sm_major) + "." + std::to_string(sm_minor));
}

}  // namespace ftx::quant
