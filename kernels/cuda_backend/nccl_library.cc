// NcclLibrary (see nccl_library.h): dlopen of libnccl.so.2 and its entry points.
#include "kernels/cuda_backend/nccl_library.h"

#ifdef FTX_HAVE_NCCL

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <mutex>

#include "formats/error.h"

namespace ftx::cuda {

namespace {

// PyTorch's CUDA wheels carry NCCL as the nvidia-nccl-cu* package: a GPU machine with torch but no
// system NCCL has it there.
std::vector<std::string> python_nccl_libraries() {
  std::vector<std::string> out;
  for (const char* pattern :
       {"/opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
        "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
        "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2"}) {
    glob_t g{};
    if (glob(pattern, 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return out;
}

// Binds fn to `name` in the library; false when it is missing.
template <typename F>
bool bind(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  return fn != nullptr;
}

// NCCL's entry points from an open handle, or why they are not there.
std::string bind_all(void* h, NcclLibrary& lib) {
  const std::pair<const char*, bool> symbols[] = {
      {"ncclGetUniqueId", bind(h, "ncclGetUniqueId", lib.get_unique_id)},
      {"ncclCommInitRank", bind(h, "ncclCommInitRank", lib.comm_init_rank)},
      {"ncclCommDestroy", bind(h, "ncclCommDestroy", lib.comm_destroy)},
      {"ncclAllReduce", bind(h, "ncclAllReduce", lib.all_reduce)},
      {"ncclAllGather", bind(h, "ncclAllGather", lib.all_gather)},
      {"ncclSend", bind(h, "ncclSend", lib.send)},
      {"ncclRecv", bind(h, "ncclRecv", lib.recv)},
      {"ncclGetErrorString", bind(h, "ncclGetErrorString", lib.get_error_string)},
      {"ncclGetVersion", bind(h, "ncclGetVersion", lib.get_version)}};
  for (const auto& [name, found] : symbols)
    if (!found) return std::string("no ") + name;
  if (lib.get_version(&lib.version) != ncclSuccess) lib.version = 0;
  // The header's types (ncclUniqueId, the enums) are fixed within a major version. Version codes
  // are X·1000 + Y·100 + Z up to 2.8 and X·10000 + Y·100 + Z after (nccl.h's NCCL_VERSION).
  const int major = lib.version >= 10000 ? lib.version / 10000 : lib.version / 1000;
  if (lib.version != 0 && major != NCCL_MAJOR)
    return "NCCL version code " + std::to_string(lib.version) + ", but ftx was built against " +
           std::to_string(NCCL_VERSION_CODE);
  return "";
}

}  // namespace

NcclLibrary load_nccl_library(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& candidate : candidates) {
    void* h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string why = h ? "" : dlerror();
    NcclLibrary lib;
    if (h) why = bind_all(h, lib);
    if (!why.empty()) {
      if (h) dlclose(h);
      tried += (tried.empty() ? "" : "; ") + candidate + " (" + why + ")";
      continue;
    }
    lib.path = candidate;
    Dl_info info{};
    char resolved[4096] = {0};
    if (dladdr(reinterpret_cast<void*>(lib.get_unique_id), &info) && info.dli_fname &&
        realpath(info.dli_fname, resolved))
      lib.path = resolved;
    return lib;  // the handle stays open for the life of the process
  }
  throw Error("NCCL (libnccl.so.2) not found, and tensor or pipeline parallelism on CUDA needs it: tried " + tried +
              ". Set FTX_NCCL_LIBRARY to the file, or run a single rank");
}

std::vector<std::string> nccl_library_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("FTX_NCCL_LIBRARY"); env && *env) out.emplace_back(env);
  out.emplace_back("libnccl.so.2");
  for (auto& p : python_nccl_libraries()) out.push_back(std::move(p));
  return out;
}

const NcclLibrary& nccl_library() {
  static std::once_flag once;
  static NcclLibrary lib;
  static std::string error;
  std::call_once(once, [] {
    try {
      lib = load_nccl_library(nccl_library_candidates());
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw Error(error);
  return lib;
}

}  // namespace ftx::cuda

#endif  // FTX_HAVE_NCCL
