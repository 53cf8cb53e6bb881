#pragma once
// The CUDA implementation of the op seam (lib/ops/backend.h), selected by `--device cuda`.
//
// Done (groundwork of issue 7, compiled for sm_90; NOT yet run on a GPU when this was written —
// tests/unit/cuda_backend_test.cc compares every op and a whole Engine run against the CPU
// backend and skips without a device):
//  * every Backend method, with the CPU backend's exact semantics (same formulas, double where the
//    CPU uses double), on fp32 activations, weights and KV cache;
//  * memory: one DeviceArena per backend (caching sub-allocator over 256 MiB cudaMalloc blocks),
//    one non-blocking stream for all work, pinned staging buffers (a ring with events) for the
//    per-call host metadata (ids, positions, lengths, cache rows, ALiBi slopes) and for download();
//  * gemm: cuBLASLt, row-major by the transpose trick (C^T = B^T·A^T), plans cached per shape and
//    pointer alignment; CUBLAS_COMPUTE_32F by default (matches the CPU within 1e-5), TF32 tensor
//    cores on request (CudaBackendOptions::tf32 or FTX_CUDA_TF32=1; ~1e-3 relative).
//  * attention: one kernel for prefill and decode (online softmax, K/V tiles in shared memory,
//    MHA/MQA/GQA, ALiBi), head_dim up to 256.
//  * gemm_config.in (use_gemm_config): a listed GEMM runs the file's algorithm, classic cuBLAS
//    rows through cublasGemmEx (FT's gpt_gemm writes only those for fp32), cuBLASLt rows rebuilt
//    from their fields when cuBLASLt accepts them for the operands; others use the heuristic.
//  * weights in fp16/bf16 (CudaBackendOptions::weight_dtype, `--dtype`), and then, by default,
//    half activations end to end as FasterTransformer runs a half model (act_dtype(),
//    CudaBackendOptions::act_dtype): the residual stream, GEMM inputs and outputs, fused QKV rows
//    and attention outputs are held in the weights' dtype; every kernel widens what it reads to
//    fp32, computes in fp32 (norm statistics in double, softmax and accumulators in fp32) and
//    rounds once where it stores; cuBLASLt multiplies half operands with fp32 accumulation into a
//    half C (the lm_head into fp32 logits), split-K only with fp32 partial sums (lt_algo.h's
//    rounds_once: the heuristic is asked for no other scheme, a tuned row with another is refused). Biases and norm parameters stay fp32. With fp32
//    activations (FTX_CUDA_FP32_ACTIVATIONS=1) a GEMM rounds its activation operand to the weights'
//    dtype first. The KV cache is held in the weights' dtype too (CudaBackendOptions::kv_dtype): K
//    and V rounded when stored, widened when read. NOT yet run on a GPU.
//  * CUDA graphs for repeated decode steps (CudaBackendOptions::graphs, opt-in): each op's host
//    metadata goes to one fixed pinned buffer, copied to the device in one copy before the graph
//    launch; on replay the ops only write their metadata and launch nothing.
//  * sample_rows (kernels/sampling/, cuda_sampling.cc): sampling rows are drawn on the device from
//    logits that stay there (lib/engine/step_logits.h); only token ids and log probs come back.
// Not done: split-KV decode attention, fused bias+activation epilogues in cuBLASLt, beam search on the GPU
// (beam steps still download their rows' logits).
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
