#pragma once
// The backend and communicator a command runs on: `device` picks the backend ("cpu" or "cuda");
// under mpirun the ranks talk over MPI, and over NCCL (device buffers) when the backend is CUDA.
#include <memory>
#include <string>

#include "lib/dist/communicator.h"
#include "lib/ops/backend.h"

namespace ftx {

struct Runtime {
  std::unique_ptr<ops::Backend> backend;
  std::unique_ptr<dist::Communicator> comm;
};

Runtime make_runtime(const std::string& device, int threads);

}  // namespace ftx
