#pragma once
// Whether a GPU can run FP8: the check the CUDA backend makes when --fp8 or --fp8-kv-cache asks for
// it (Backend::require_fp8). Host code only, so it is tested without a device.
#include <string>

namespace ftx::cuda {

// FP8 GEMMs and KV caches need FP8 tensor cores: compute capability 8.9 (Ada) or 9.0 (Hopper) and
// up. Throws Error naming the device, the flag and the device's capability otherwise.
void require_fp8_device(const std::string& device_name, int sm_major, int sm_minor, const std::string& flag);

}  // namespace ftx::cuda
