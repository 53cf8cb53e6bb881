#include "lib/engine/runtime.h"

#include "formats/error.h"
#include "lib/dist/device_communicator.h"

namespace ftx {

Runtime make_runtime(const RuntimeOptions& o) {
  const std::string& device = o.device;
  if (device != "cuda" && !o.gemm_config.empty())
    throw UsageError("--gemm-config applies to --device cuda only (the " + device + " backend has no GEMM algorithms to choose)");
  Runtime rt;
  rt.backend = ops::make_backend(device, o.threads, o.weight_dtype);
  if (device == "cuda") rt.backend->use_gemm_config(o.gemm_config, o.model_dir);
  // The engine all-reduces activations in the backend's memory: device buffers need the device's
  // communicator (NCCL for cuda), registered from kernels/.
  rt.comm = dist::communicator_for_device(device, dist::make_communicator(), *rt.backend);
  return rt;
}

}  // namespace ftx
