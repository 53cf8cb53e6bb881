#pragma once
// A safe unpickler for PyTorch checkpoints: it builds plain data only (formats/value.h), never runs
// code, and refuses any GLOBAL outside a fixed allow-list with an Error naming it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "formats/value.h"

namespace ftx {

// Resolves a persistent id (the tuple BINPERSID delivers) to a value; torch's readers turn
// ('storage', StorageType, key, location, numel) into a storage reference.
using PersistentLoader = std::function<ValuePtr(const ValuePtr& pid)>;

// Decodes one pickle from [data, data+size). `origin` names the file for errors. `consumed`, when
// given, receives the number of bytes up to and including STOP (legacy files hold several pickles).
ValuePtr unpickle(const uint8_t* data, size_t size, const std::string& origin,
                  const PersistentLoader& persistent_load, size_t* consumed = nullptr);

}  // namespace ftx
