#pragma once
// Every backend registers a factory here under its device name and make_backend() looks them up, so
// ops/ names none of them: the CPU backend (lib/cpu/cpu_registration.cc, above ops/) and the CUDA one
// (kernels/register/, outside lib/, which depends on lib/, never the reverse; registered when the
// CUDA backend is built in).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/ops/backend.h"

namespace ftx::ops {

struct BackendOptions {
  int threads = 0;                       // CPU threads (a GPU backend ignores it)
  DType weight_dtype = DType::kFloat32;  // what weight matrices are held in
};

using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

// Registers `factory` for `device` ("cuda", ...), replacing an earlier one of that name. Safe to call
// from static initializers.
void register_backend(const std::string& device, BackendFactory factory);

// The factory for `device`, or nullptr when none is registered.
const BackendFactory* find_backend_factory(const std::string& device);

// Registered device names, sorted (for messages).
std::vector<std::string> registered_backends();

}  // namespace ftx::ops
