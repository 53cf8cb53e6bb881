// CudaBackend, made and given back: make_cuda_backend() picks the device (the node-local rank under
// mpirun or Slurm) and the options the environment may switch on; the constructor queries what the
// rooms need once, the destructor returns everything without throwing. The other rooms are listed
// in cuda_backend_impl.h.
#include "kernels/cuda_backend/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/quantization/fp8_device.h"

namespace ftx::cuda {

namespace {

// The node-local rank under the common launchers; -1 when not launched by one.
int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                        "LOCAL_RANK"})
    if (const char* s = std::getenv(v)) {
      char* end = nullptr;
      const long r = std::strtol(s, &end, 10);
      if (end != s && r >= 0) return static_cast<int>(r);
    }
  return -1;
}

}  // namespace

int device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<ops::Backend> make_cuda_backend(const CudaBackendOptions& options) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("no CUDA device found (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")");
  }
  if (n == 0) throw Error("no CUDA device found (cudaGetDeviceCount: 0 devices)");
  int dev = options.device;
  if (dev < 0) dev = std::max(local_rank(), 0) % n;
  if (dev >= n)
    throw Error("CUDA device " + std::to_string(dev) + " requested, but only " + std::to_string(n) + " found");
  const char* tf32_env = std::getenv("FTX_CUDA_TF32");
  const bool tf32 = options.tf32 || (tf32_env && std::string(tf32_env) == "1");
  const char* graphs_env = std::getenv("FTX_CUDA_GRAPHS");
  const bool graphs = options.graphs || (graphs_env && std::string(graphs_env) == "1");
  std::optional<DType> act = options.act_dtype;
  const char* fp32_act_env = std::getenv("FTX_CUDA_FP32_ACTIVATIONS");
  if (fp32_act_env && std::string(fp32_act_env) == "1") act = DType::kFloat32;
  return std::make_unique<CudaBackend>(dev, tf32, options.weight_dtype, graphs, options.kv_dtype, act);
}

CudaBackend::CudaBackend(int device, bool tf32, DType weight_dtype, bool graphs, std::optional<DType> kv_dtype,
                         std::optional<DType> act_dtype)
    : device_(device), tf32_(tf32), weight_dtype_(weight_dtype), kv_dtype_(kv_dtype.value_or(weight_dtype)),
      act_dtype_(act_dtype.value_or(weight_dtype)), graphs_(graphs) {
  for (DType t : {weight_dtype_, kv_dtype_})
    if (!ops::is_act_dtype(t))
      throw Error(std::string("CUDA backend: weights and the KV cache cannot be held in ") + dtype_name(t) +
                  " (fp32, fp16 or bf16)");
  // Half activations with fp32 weights would round what an fp32 model computes, for nothing.
  if (act_dtype_ != DType::kFloat32 && act_dtype_ != weight_dtype_)
    throw Error(std::string("CUDA backend: activations in ") + dtype_name(act_dtype_) + " with weights in " +
                dtype_name(weight_dtype_) + " (fp32, or the weights' dtype)");
  FTX_CUDA_CHECK(cudaSetDevice(device_));
  FTX_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin_, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_));
  FTX_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  int max_pitch = 0;
  FTX_CUDA_CHECK(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, device_));
  max_pitch_ = static_cast<size_t>(max_pitch);
  FTX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  FTX_CUBLAS_CHECK(cublasLtCreate(&lt_));
  workspace_ = arena_.allocate(kWorkspaceBytes);
}

CudaBackend::~CudaBackend() {
  // Best effort, no throwing: finish queued work, then give everything back.
  cudaSetDevice(device_);
  if (step_mode_ == StepMode::kCapture) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
  }
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& [key, st] : steps_)
    if (st.exec) cudaGraphExecDestroy(st.exec);
  if (step_meta_host_) cudaFreeHost(step_meta_host_);
  if (step_meta_copied_) cudaEventDestroy(step_meta_copied_);
  clear_plans();
  if (blas_) cublasDestroy(blas_);
  if (lt_) cublasLtDestroy(lt_);
  for (Slot& s : slots_) {
    if (s.host) cudaFreeHost(s.host);
    if (s.done) cudaEventDestroy(s.done);
  }
  if (download_buf_) cudaFreeHost(download_buf_);
  if (stream_) cudaStreamDestroy(stream_);
  // arena_ frees the device blocks in its destructor.
}

void CudaBackend::synchronize() { FTX_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaBackend::require_fp8(const std::string& flag) const {
  cudaDeviceProp prop{};
  FTX_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  require_fp8_device("GPU " + std::to_string(device_) + " (" + prop.name + ")", prop.major, prop.minor, flag);
}

}  // namespace ftx::cuda
