#include "lib/ops/backend_registry.h"

#include <map>
#include <mutex>

namespace ftx::ops {

namespace {

// Function-local statics: registrations run from static initializers of other translation units,
// whose order relative to this one is unspecified.
std::map<std::string, BackendFactory>& registry() {
  static std::map<std::string, BackendFactory> r;
  return r;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_backend(const std::string& device, BackendFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[device] = std::move(factory);
}

const BackendFactory* find_backend_factory(const std::string& device) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto it = registry().find(device);
  return it == registry().end() ? nullptr : &it->second;  // map nodes never move
}

std::vector<std::string> registered_backends() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

}  // namespace ftx::ops
