#include "lib/dist/device_communicator.h"

#include <map>
#include <mutex>

#include "formats/error.h"

namespace ftx::dist {

namespace {

// Function-local statics: registrations run from other translation units' static initializers.
std::map<std::string, DeviceCommunicatorFactory>& registry() {
  static std::map<std::string, DeviceCommunicatorFactory> r;
  return r;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_device_communicator(const std::string& device, DeviceCommunicatorFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[device] = std::move(factory);
}

std::unique_ptr<Communicator> communicator_for_device(const std::string& device, std::unique_ptr<Communicator> host,
                                                      ops::Backend& backend) {
  if (device == "cpu" || host->size() <= 1) return host;
  DeviceCommunicatorFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    if (auto it = registry().find(device); it != registry().end()) factory = it->second;
  }
  if (!factory)
    throw Error("--device " + device + " with " + std::to_string(host->size()) +
                " MPI ranks: this build has no communicator for " + device +
                " buffers (MPI reduces host memory only); run a single rank or use --device cpu");
  return factory(std::move(host), backend);
}

}  // namespace ftx::dist
