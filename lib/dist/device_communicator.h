#pragma once
// Communicators for backends whose buffers are not host memory. The engine all-reduces activations
// in the backend's memory, which an MPI (host) communicator cannot read when they live on a GPU.
// A device registers a factory here that builds its own communicator from the host one (the CUDA
// backend's NCCL communicator, registered from kernels/register/); lib/ never names it.
#include <functional>
#include <memory>
#include <string>

#include "lib/dist/communicator.h"
#include "lib/ops/backend.h"

namespace ftx::dist {

// Builds a communicator for `backend`'s buffers from the host communicator (several ranks).
using DeviceCommunicatorFactory =
    std::function<std::unique_ptr<Communicator>(std::unique_ptr<Communicator> host, ops::Backend& backend)>;

// Registers `factory` for `device`, replacing an earlier one of that name. Safe to call from static
// initializers.
void register_device_communicator(const std::string& device, DeviceCommunicatorFactory factory);

// The communicator a run on `device` uses: the host one on the CPU or with a single rank (nothing
// to reduce); with several ranks, the device's registered communicator, and an Error naming the
// device and the rank count when it has none (device pointers must never reach MPI).
std::unique_ptr<Communicator> communicator_for_device(const std::string& device, std::unique_ptr<Communicator> host,
                                                      ops::Backend& backend);

}  // namespace ftx::dist
