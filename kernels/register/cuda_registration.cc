// Makes the CUDA pieces reachable from lib/ without lib/ including kernels/: the "cuda" backend,
// its communicator for several ranks, and the GEMM tuner behind `ftx gemm-tune`.
//
// Registration runs from this file's static initializer. Nothing references a symbol here, so in a
// plain static library the linker would drop the file and `--device cuda` would report that CUDA
// is not built in. CMake links this library (ftx_cuda_register) whole-archive into every
// executable through the ftx_runtime interface target, which keeps it without each main() (ftx,
// every test, every benchmark) having to remember an explicit call.
#include <memory>
#include <string>

#include "formats/error.h"
#include "kernels/cuda_backend/cuda_backend.h"
#include "kernels/cuda_backend/nccl_communicator.h"
#include "kernels/gemm_tune/run_gemm_tune.h"
#include "lib/dist/device_communicator.h"
#include "lib/gemm/gemm_tune.h"
#include "lib/ops/backend_registry.h"

namespace ftx::cuda {
namespace {

std::unique_ptr<dist::Communicator> cuda_communicator(std::unique_ptr<dist::Communicator> host, ops::Backend& backend) {
#ifdef FTX_HAVE_NCCL
  return make_nccl_communicator(std::move(host), backend);
#else
  // Several ranks (communicator_for_device asks only then): the MPI communicator would be handed
  // device pointers.
  (void)backend;
  throw Error("--device cuda with " + std::to_string(host->size()) +
              " MPI ranks: this ftx was built without NCCL, and MPI cannot reduce GPU buffers; run a single "
              "rank, use --device cpu, or rebuild with NCCL");
#endif
}

const bool kRegistered = [] {
  ops::register_backend("cuda", [](const ops::BackendOptions& o) {
    CudaBackendOptions options;
    options.weight_dtype = o.weight_dtype;
    return make_cuda_backend(options);  // Error when there is no device
  });
  dist::register_device_communicator("cuda", cuda_communicator);
  gemm::register_gemm_tune_runner(run_gemm_tune_on_gpu);
  return true;
}();

}  // namespace
}  // namespace ftx::cuda
