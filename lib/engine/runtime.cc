#include "lib/engine/runtime.h"

#if defined(FTX_HAVE_CUDA) && defined(FTX_HAVE_NCCL)
#include "kernels/cuda_backend/nccl_communicator.h"
#endif

namespace ftx {

Runtime make_runtime(const std::string& device, int threads) {
  Runtime rt;
  rt.backend = ops::make_backend(device, threads);
  rt.comm = dist::make_communicator();
#if defined(FTX_HAVE_CUDA) && defined(FTX_HAVE_NCCL)
  // The engine all-reduces activations in the backend's memory: device buffers need NCCL.
  if (device == "cuda") rt.comm = cuda::make_nccl_communicator(std::move(rt.comm), *rt.backend);
#endif
  return rt;
}

}  // namespace ftx
