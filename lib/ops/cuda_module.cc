#include "lib/ops/cuda_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <string>

#include "formats/error.h"

namespace ftx::ops {

namespace {

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  const std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

struct LoadResult {
  bool loaded = false;
  std::string error;  // set when a module was found and failed to load
};

LoadResult load_once() {
  const std::string dir = executable_dir();
  if (dir.empty()) return {};
  const std::string beside = dir + "/libftx_cuda.so", installed = dir + "/../lib/ftx/libftx_cuda.so";
  for (const std::string& path : {beside, installed}) {
    if (access(path.c_str(), F_OK) != 0) continue;
    // RTLD_NOW: a missing symbol or library is reported here, in one line, not at the first call.
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) return {true, ""};
    const char* why = dlerror();
    return {false, path + ": cannot load the CUDA backend: " + (why ? why : "dlopen failed")};
  }
#ifdef FTX_CUDA_MODULE
  // Built with CUDA, so the module was built beside the binary: this copy of ftx was moved without it.
  return {false, "the CUDA backend of this ftx, libftx_cuda.so, is neither beside it (" + beside + ") nor in " +
                     installed + ": copy it along with the binary"};
#else
  return {};
#endif
}

}  // namespace

bool load_cuda_module() {
  static std::once_flag once;
  static LoadResult result;
  std::call_once(once, [] { result = load_once(); });
  if (!result.error.empty()) throw Error(result.error);
  return result.loaded;
}

}  // namespace ftx::ops
