#pragma once
// The CUDA implementation of the op seam (lib/ops/backend.h), selected by `--device cuda`. What it
// does, and what it does not do yet, is in docs/cuda.md#what-the-backend-does; its rooms are listed
// in cuda_backend_impl.h.
//
// Pointer contract: every float* and ops::Act the Backend methods take or return is device memory
// owned by this backend (from alloc() or alloc_act()), except the host arguments the interface names (upload source, download
// destination, ids/positions/lengths/cache rows/ALiBi slopes). A dist::Communicator used with this
// backend therefore gets device pointers in all_reduce_sum (see nccl_communicator.h).
#include <memory>
#include <optional>

#include "lib/ops/backend.h"

namespace ftx::cuda {

struct CudaBackendOptions {
  int device = -1;    // -1: the local MPI rank (OMPI_COMM_WORLD_LOCAL_RANK, ...) modulo the GPU count, else 0
  bool tf32 = false;  // TF32 tensor-core GEMMs (faster, ~1e-3 relative); also FTX_CUDA_TF32=1
  // What weight matrices are held in: fp32, or fp16/bf16 (half the memory and bandwidth; GEMMs
  // round the activation operand to it, run on tensor cores and accumulate in fp32).
  DType weight_dtype = DType::kFloat32;
  // What the KV cache is held in; unset: the weights' dtype (so --dtype fp16 halves the cache too).
  std::optional<DType> kv_dtype;
  // What activations (the residual stream, GEMM inputs and outputs, attention) are held in; unset:
  // the weights' dtype, FasterTransformer's way (a half model runs half end to end, fp32 only in
  // accumulators, norm statistics and softmax). fp32 keeps them fp32 with half weights (the GEMMs
  // then round their activation operand), also FTX_CUDA_FP32_ACTIVATIONS=1.
  std::optional<DType> act_dtype;
  // Decode steps as CUDA graphs (Backend::begin_repeatable): a step's first run is eager, its
  // second is captured, later ones replay it. Off by default until it has run on a GPU; also
  // FTX_CUDA_GRAPHS=1.
  bool graphs = false;
};

// Number of CUDA devices, 0 when there is none or no usable driver (never throws).
int device_count();

// ops::make_backend("cuda", ...) calls this with default options.
// Throws ftx::Error("no CUDA device found (cudaGetDeviceCount: <error string>)") without a device.
std::unique_ptr<ops::Backend> make_cuda_backend(const CudaBackendOptions& options = {});

}  // namespace ftx::cuda
