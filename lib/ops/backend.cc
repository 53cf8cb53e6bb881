// Device-independent pieces of the op seam: ALiBi slopes and the backend factory.
#include "lib/ops/backend.h"

#include <cmath>

#include "formats/error.h"
#include "lib/cpu/cpu_backend.h"
#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/cuda_backend.h"
#endif

namespace ftx::ops {

std::vector<float> alibi_slopes(int64_t num_heads) {
  int64_t n2 = 1;
  while (n2 * 2 <= num_heads) n2 *= 2;
  std::vector<float> s(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h) {
    const double e = h < n2 ? -8.0 * static_cast<double>(h + 1) / static_cast<double>(n2)
                            : -4.0 * static_cast<double>(2 * (h - n2) + 1) / static_cast<double>(n2);
    s[h] = static_cast<float>(std::pow(2.0, e));
  }
  return s;
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
  if (device == "cpu") return std::make_unique<cpu::CpuBackend>(threads);
#ifdef FTX_HAVE_CUDA
  if (device == "cuda") return cuda::make_cuda_backend();  // Error when there is no device
#endif
  if (device == "cuda") throw Error("--device cuda: the CUDA backend is not built in this version");
  throw Error("--device " + device + ": unknown device (expected cpu or cuda)");
}

}  // namespace ftx::ops
