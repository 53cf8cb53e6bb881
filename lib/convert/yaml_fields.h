#pragma once
// Reading fields of a NeMo model_config.yaml: required integers (an Error naming the key and the
// file) and optional values with a default (absent, null or of another type).
#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

#include "formats/error.h"

namespace ftx {

inline int64_t yaml_int(const YAML::Node& n, const char* k, const std::string& origin) {
  if (!n[k] || n[k].IsNull()) throw Error(origin, std::string("missing key '") + k + "'");
  try {
    return n[k].as<int64_t>();
  } catch (const YAML::Exception&) {
    throw Error(origin, std::string("key '") + k + "' is not an integer: " + n[k].as<std::string>(""));
  }
}

template <typename T>
T yaml_or(const YAML::Node& n, const char* k, T def) {
  if (!n[k] || n[k].IsNull()) return def;
  try {
    return n[k].as<T>();
  } catch (const YAML::Exception&) {
    return def;
  }
}

}  // namespace ftx
