// Makes the CPU backend reachable as ops::make_backend("cpu") the way kernels/register/ makes the
// CUDA one reachable: ops/ names no backend, each registers itself under its device name.
//
// Registration runs from this file's static initializer. Nothing references a symbol here, so in a
// plain static library the linker would drop the file; CMake builds it as a library of its own
// (ftx_cpu_register) and links it whole-archive into every executable through ftx_runtime.
#include <memory>

#include "lib/cpu/cpu_backend.h"
#include "lib/ops/backend_registry.h"

namespace ftx::cpu {
namespace {

const bool kRegistered = [] {
  ops::register_backend("cpu", [](const ops::BackendOptions& o) -> std::unique_ptr<ops::Backend> {
    return std::make_unique<CpuBackend>(o.threads, o.weight_dtype);
  });
  return true;
}();

}  // namespace
}  // namespace ftx::cpu
