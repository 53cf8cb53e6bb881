#include "lib/engine/runtime.h"

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/model/model_config.h"

#if defined(FTX_HAVE_CUDA) && defined(FTX_HAVE_NCCL)
#include "kernels/cuda_backend/nccl_communicator.h"
#endif

namespace ftx {

Runtime make_runtime(const RuntimeOptions& o) {
  const std::string& device = o.device;
  if (device != "cuda" && !o.gemm_config.empty())
    throw UsageError("--gemm-config applies to --device cuda only (the " + device + " backend has no GEMM algorithms to choose)");
  Runtime rt;
  rt.comm = dist::make_communicator();
  // The grid is checked before any collective: every rank reaches the same verdict from its flags,
  // the world size and config.ini, and stops with the same one-line error.
  int64_t num_layer = -1;
  if (o.pipeline_para_size > 1)
    num_layer = ModelConfig::from_ini(IniFile::read(o.model_dir + "/config.ini")).num_layer;
  const dist::ParallelLayout layout =
      dist::ParallelLayout::resolve(o.tensor_para_size, o.pipeline_para_size, rt.comm->size(), rt.comm->rank(),
                                    num_layer);
  rt.backend = ops::make_backend(device, o.threads, o.weight_dtype);
  if (device == "cuda") rt.backend->use_gemm_config(o.gemm_config, o.model_dir);
#if defined(FTX_HAVE_CUDA) && defined(FTX_HAVE_NCCL)
  // The engine all-reduces activations in the backend's memory: device buffers need NCCL.
  if (device == "cuda") rt.comm = cuda::make_nccl_communicator(std::move(rt.comm), *rt.backend);
#endif
  rt.groups = std::make_unique<dist::ParallelGroups>(*rt.comm, layout);
  return rt;
}

}  // namespace ftx
