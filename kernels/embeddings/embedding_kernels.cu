// Embeddings room.
// Each kernel mirrors the CPU reference in lib/cpu/cpu_backend.cc formula for formula (same operand
// order, double where the CPU uses double), so the two agree to a few ulp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/elem.cuh"
#include "kernels/embeddings/embedding_kernels.h"

namespace ftx::cuda {

namespace {

// One block per row. The table row is read in its stored dtype (fp32, or fp16/bf16 weights) and
// widened to fp32. Sinusoidal (fairseq): [sin(pos·f_i) | cos(pos·f_i)], f_i = exp(-i·ln(1e4)/(H/2-1)),
// in double as the CPU; an odd last column gets no position term.
// O: the activations' type (the row is summed in fp32 and rounded to O once).
template <typename O, typename T>
__global__ void embedding_kernel(O* out, const T* wte, const float* wpe, ops::PositionTable table, int64_t offset,
                                 const int32_t* ids, const int32_t* positions, int64_t H, float scale) {
  const int64_t r = blockIdx.x;
  const T* e = wte + static_cast<int64_t>(ids[r]) * H;
  const int64_t pos = static_cast<int64_t>(positions[r]) + offset;
  O* o = out + r * H;
  const int64_t half = H / 2;
  const double step = log(10000.0) / static_cast<double>(half > 1 ? half - 1 : 1);
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = to_float(e[i]) * scale;
    if (table == ops::PositionTable::kLearned) {
      v += wpe[pos * H + i];
    } else if (table == ops::PositionTable::kSinusoidal && i < 2 * half) {
      const int64_t j = i < half ? i : i - half;
      const double a = static_cast<double>(pos) * exp(-static_cast<double>(j) * step);
      v += static_cast<float>(i < half ? sin(a) : cos(a));
    }
    o[i] = from_float<O>(v);
  }
}

template <typename O, typename T>
void embedding_rows(cudaStream_t stream, O* out, const T* wte, const float* wpe, ops::PositionTable table,
                    int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows, int64_t H,
                    float scale) {
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(256, std::max<int64_t>(32, (H + 31) / 32 * 32)));
  for (int64_t r0 = 0; r0 < rows; r0 += 1 << 20) {
    const int64_t n = std::min<int64_t>(rows - r0, 1 << 20);
    embedding_kernel<O, T><<<static_cast<unsigned>(n), threads, 0, stream>>>(out + r0 * H, wte, wpe, table,
                                                                         position_offset, ids + r0, positions + r0, H,
                                                                         scale);
    FTX_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void invoke_embedding_lookup(cudaStream_t stream, void* out, ElemKind out_kind, const void* wte, ElemKind wte_kind,
                             const float* wpe, ops::PositionTable table, int64_t position_offset, const int32_t* ids,
                             const int32_t* positions, int64_t rows, int64_t H, float scale) {
  if (rows <= 0 || H <= 0) return;
  if (wte_kind == ElemKind::kInt8 || wte_kind == ElemKind::kFp8E4M3)
    throw Error("CUDA embedding: no int8 or fp8 embedding tables");
  with_act_type(out_kind, "embedding", [&](auto out_tag) {
    using O = decltype(out_tag);
    with_act_type(wte_kind, "embedding table", [&](auto table_tag) {
      using T = decltype(table_tag);
      embedding_rows(stream, static_cast<O*>(out), static_cast<const T*>(wte), wpe, table, position_offset, ids,
                     positions, rows, H, scale);
    });
  });
}

}  // namespace ftx::cuda
