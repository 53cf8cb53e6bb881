// Attention room: rotary embedding (GPT-J interleaved or NeoX half-split pairs).
// Each kernel mirrors the CPU reference in lib/cpu/cpu_backend.cc formula for formula (same operand
// order, double where the CPU uses double), so the two agree to a few ulp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/attention/rotary_kernels.h"

namespace ftx::cuda {

namespace {

// One thread per (row, pair); the angle in double as the CPU (positions reach thousands), from the
// frequencies the host computed (rope_inv_freq: scaled rope included); cos and sin times
// `magnitude` in double, as the CPU (1 leaves them exact).
// The pair is read from and written back in the activations' kind (rounded once, like any op).
__global__ void rotary_kernel(void* qkv, ElemKind kind, int64_t rows, int64_t stride, const int32_t* positions,
                              int64_t heads, int64_t head_dim, int64_t rot_dim, bool interleaved,
                              const double* inv_freq, double magnitude) {
  const int64_t pairs = rot_dim / 2;
  const size_t n = static_cast<size_t>(rows) * pairs;
  for (size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x; idx < n;
       idx += size_t(gridDim.x) * blockDim.x) {
    const int64_t r = static_cast<int64_t>(idx / pairs), i = static_cast<int64_t>(idx % pairs);
    const double angle = static_cast<double>(positions[r]) * inv_freq[i];
    const float c = static_cast<float>(cos(angle) * magnitude), s = static_cast<float>(sin(angle) * magnitude);
    const int64_t a = interleaved ? 2 * i : i;
    const int64_t b = interleaved ? 2 * i + 1 : i + pairs;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t v = r * stride + h * head_dim;
      const float x0 = load_act(qkv, kind, v + a), x1 = load_act(qkv, kind, v + b);
      store_act(qkv, kind, v + a, x0 * c - x1 * s);
      store_act(qkv, kind, v + b, x1 * c + x0 * s);
    }
  }
}

}  // namespace

void invoke_rotary(cudaStream_t stream, ElemKind kind, void* qkv, int64_t rows, int64_t stride,
                   const int32_t* positions, int64_t heads, int64_t head_dim, int64_t rot_dim, bool interleaved,
                   const double* inv_freq, double magnitude) {
  if (rows <= 0 || rot_dim < 2 || heads <= 0) return;
  with_act_type(kind, "rotary", [](auto) {});  // refuses a kind activations are never held in
  const size_t n = static_cast<size_t>(rows) * (rot_dim / 2);
  rotary_kernel<<<grid_for(n), 256, 0, stream>>>(qkv, kind, rows, stride, positions, heads, head_dim, rot_dim,
                                                  interleaved, inv_freq, magnitude);
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
