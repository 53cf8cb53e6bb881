#pragma once
// NcclLibrary: NCCL's entry points, found at run time (dlopen) the first time a multi-rank CUDA
// communicator is built, instead of being linked into every binary. A single-GPU run (and every
// test and tool that never makes a second rank) then starts on a machine without libnccl.so.2, as
// a fresh GPU machine is until something provides it; a multi-rank run without it is a one-line
// error naming where it looked.
//
// Where it looks, in order: $FTX_NCCL_LIBRARY (a file path), then the loader's own search
// ("libnccl.so.2": LD_LIBRARY_PATH, the binary's RPATH, ld.so.cache), then the NCCL that PyTorch's
// wheels bring (site-packages/nvidia/nccl/lib under the usual Python prefixes).
// Compiled only with nccl.h at hand (FTX_HAVE_NCCL); nothing links libnccl.
#ifdef FTX_HAVE_NCCL

#include <nccl.h>

#include <string>
#include <vector>

namespace ftx::cuda {

struct NcclLibrary {
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) =
      nullptr;
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  const char* (*get_error_string)(ncclResult_t) = nullptr;
  ncclResult_t (*get_version)(int*) = nullptr;
  std::string path;  // the file that was loaded
  int version = 0;   // NCCL_VERSION_CODE of that library
};

// The process's NCCL, loaded once (thread-safe); Error naming every place tried when none loads or
// a symbol is missing.
const NcclLibrary& nccl_library();

// The places nccl_library() tries, in order.
std::vector<std::string> nccl_library_candidates();

// The first of `candidates` that loads as NCCL with every entry point ftx uses; Error naming each
// candidate and why it failed when none does. nccl_library() is this over the candidates above.
NcclLibrary load_nccl_library(const std::vector<std::string>& candidates);

}  // namespace ftx::cuda

#endif  // FTX_HAVE_NCCL
