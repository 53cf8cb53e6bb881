#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/quantization/int4_gemm.h"

namespace ftx::cuda {

namespace {

constexpr int kThreads = kInt4ColThreads * kInt4Slices;
constexpr int kBlockCols = kInt4ColThreads * 8;

// An activation rounded to the GEMM's input type In (nearest even) and widened back: exact for In
// = float and for a value already held in In.
template <typename In>
__device__ inline float round_to(float v) {
  return to_float(from_float<In>(v));
}

// The explicit __fmul_rn/__fmaf_rn/__fadd_rn keep the compiler from fusing or reordering anything:
// the order is int4_gemm_twin's (int4_layout.h), step for step.
template <typename In>
__global__ void __launch_bounds__(kThreads)
    int4_gemm_kernel(void* C, ElemKind c_kind, const void* A, ElemKind a_kind, Int4DeviceWeight w, int64_t M, int64_t N,
                     int64_t K, int64_t n_pad, float beta) {
  __shared__ float a_s[kInt4TileM][kInt4StepRows];  // A' of this step's rows, in the layout's row order
  __shared__ int32_t g_s[kInt4StepRows];            // the group of each of them
  __shared__ float red[kInt4Slices][kBlockCols];    // one row of the slices' sums

  const int ct = threadIdx.x % kInt4ColThreads, slice = threadIdx.x / kInt4ColThreads;
  const int64_t words = n_pad / 8;  // 32-bit words of nibbles per row
  const int64_t word = static_cast<int64_t>(blockIdx.x) * kInt4ColThreads + ct;
  const bool active = word < words;
  const int64_t n0 = word * 8;
  const auto* packed = reinterpret_cast<const uint32_t*>(w.packed);

  for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kInt4TileM; m0 < M;
       m0 += static_cast<int64_t>(gridDim.y) * kInt4TileM) {
    const int rows = static_cast<int>(M - m0 < kInt4TileM ? M - m0 : kInt4TileM);
    float acc[kInt4TileM][8];
#pragma unroll
    for (int i = 0; i < kInt4TileM; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    int32_t cur_g = -1;
    float s[8], z[8];

    for (int64_t k0 = 0; k0 < K; k0 += kInt4StepRows) {
      __syncthreads();  // the previous step's a_s and g_s are read
      for (int i = threadIdx.x; i < kInt4TileM * kInt4StepRows; i += kThreads) {
        const int r = i / kInt4StepRows, kk = i % kInt4StepRows;
        const int64_t k = k0 + kk;
        float v = 0.0f;
        if (r < rows && k < K) {
          const int64_t src = w.perm ? w.perm[k] : k;
          v = round_to<In>(load_act(A, a_kind, (m0 + r) * K + src));
        }
        a_s[r][kk] = v;
      }
      for (int i = threadIdx.x; i < kInt4StepRows; i += kThreads) {
        const int64_t k = k0 + i;
        g_s[i] = k < K ? (w.row_group ? w.row_group[k] : static_cast<int32_t>(k / w.group_size)) : 0;
      }
      __syncthreads();
      if (!active) continue;
#pragma unroll
      for (int r = 0; r < kInt4SliceRows; ++r) {
        const int kk = slice * kInt4SliceRows + r;
        const int64_t k = k0 + kk;
        if (k >= K) break;
        const int32_t g = g_s[kk];
        if (g != cur_g) {  // a new group: its 8 scales and zero points
          const float4* sp = reinterpret_cast<const float4*>(w.scales + g * n_pad + n0);
          const float4 s0 = sp[0], s1 = sp[1];
          s[0] = s0.x, s[1] = s0.y, s[2] = s0.z, s[3] = s0.w, s[4] = s1.x, s[5] = s1.y, s[6] = s1.z, s[7] = s1.w;
          if (w.zeros) {
            const uint2 zp = *reinterpret_cast<const uint2*>(w.zeros + g * n_pad + n0);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              z[j] = static_cast<float>((zp.x >> (8 * j)) & 0xFFu);
              z[j + 4] = static_cast<float>((zp.y >> (8 * j)) & 0xFFu);
            }
          } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) z[j] = 8.0f;
          }
          cur_g = g;
        }
        const uint32_t q = packed[k * words + word];
        float wv[8];
#pragma unroll
        for (int j = 0; j < 8; ++j)  // column n0 + j is bits 4j..4j+3 (low nibble first, bytes in order)
          wv[j] = __fmul_rn(static_cast<float>((q >> (4 * j)) & 0xFu) - z[j], s[j]);  // u - z exact
#pragma unroll
        for (int i = 0; i < kInt4TileM; ++i) {
          const float a = a_s[i][kk];
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(a, wv[j], acc[i][j]);
        }
      }
    }

    // The slices' sums, row by row through shared memory, in slice order.
#pragma unroll
    for (int i = 0; i < kInt4TileM; ++i) {
      __syncthreads();
#pragma unroll
      for (int j = 0; j < 8; ++j) red[slice][ct * 8 + j] = acc[i][j];
      __syncthreads();
      if (i < rows && threadIdx.x < kBlockCols) {
        const int64_t n = static_cast<int64_t>(blockIdx.x) * kBlockCols + threadIdx.x;
        if (n < N) {
          float sum = red[0][threadIdx.x];
          for (int sl = 1; sl < kInt4Slices; ++sl) sum = __fadd_rn(sum, red[sl][threadIdx.x]);
          const int64_t idx = (m0 + i) * N + n;
          if (beta != 0.0f) sum = __fmaf_rn(beta, load_act(C, c_kind, idx), sum);
          store_act(C, c_kind, idx, sum);
        }
      }
    }
  }
}

}  // namespace

void invoke_int4_gemm(cudaStream_t stream, void* C, ElemKind c_kind, const void* A, ElemKind a_kind, ElemKind in_kind,
                      const Int4DeviceWeight& w, int64_t M, int64_t N, int64_t K, float beta) {
  if (M <= 0 || N <= 0 || K <= 0) return;
  with_act_type(a_kind, "INT4 gemm input", [](auto) {});
  with_act_type(c_kind, "INT4 gemm output", [](auto) {});
  const int64_t n_pad = (N + kInt4ColumnAlign - 1) / kInt4ColumnAlign * kInt4ColumnAlign;
  const int64_t m_tiles = (M + kInt4TileM - 1) / kInt4TileM;
  const dim3 grid(static_cast<unsigned>((n_pad + kBlockCols - 1) / kBlockCols),
                  static_cast<unsigned>(std::min<int64_t>(m_tiles, 65535)));
  with_act_type(in_kind, "INT4 gemm input dtype", [&](auto tag) {
    using In = decltype(tag);
    int4_gemm_kernel<In><<<grid, kThreads, 0, stream>>>(C, c_kind, A, a_kind, w, M, N, K, n_pad, beta);
  });
  FTX_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ftx::cuda
