#include "kernels/quantization/fp8_device.h"

#include "formats/error.h"

namespace ftx::cuda {

void require_fp8_device(const std::string& device_name, int sm_major, int sm_minor, const std::string& flag) {
  if (sm_major > 8 || (sm_major == 8 && sm_minor >= 9)) return;
  throw Error(device_name, flag + " needs FP8 tensor cores (compute capability 8.9 or 9.0 and up: Ada, Hopper); this GPU is " +
                               std::to_string(sm_major) + "." + std::to_string(sm_minor));
}

}  // namespace ftx::cuda
