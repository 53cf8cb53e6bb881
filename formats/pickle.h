#pragma once
// A safe unpickler for PyTorch checkpoints: it builds plain data only (formats/value.h), never runs
// code, and refuses any GLOBAL outside a fixed allow-list with an Error naming it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/value.h"

namespace ftx {

// Resolves a persistent id (the tuple BINPERSID delivers) to a value; torch's readers turn
// ('storage', StorageType, key, location, numel) into a storage reference.
using PersistentLoader = std::function<ValuePtr(const ValuePtr& pid)>;

// The globals a pickle that is not torch.save's may name, replacing torch.save's list: exactly
// the classes one kind of file holds (PyTorch Distributed Checkpoint's `.metadata`).
struct PickleAllowList {
  // Names from torch.save's list that this file may use too ("torch.Size", "collections.OrderedDict").
  std::vector<std::string> builtin;
  bool torch_dtypes = false;  // torch.float32, torch.bfloat16, ... as dtype values
  // Dataclasses: opaque objects (Value::Kind::kObject, `str` = the class) that keep their BUILD
  // state: a dict state in `dict`, a tuple state's items in `items`.
  std::vector<std::string> records;
  // Other classes and values (enum classes, torch.strided): opaque objects keeping their
  // constructor arguments in `items`.
  std::vector<std::string> opaque;
};

// torch's canonical dtype spelling (a pickled `torch.float32` global decodes to a Value of kind
// kDType named "float32") -> DType; false for a name ftx has no type for.
bool dtype_from_torch_name(const std::string& torch_name, DType* out);

// Decodes one pickle from [data, data+size). `origin` names the file for errors. `consumed`, when
// given, receives the number of bytes up to and including STOP (legacy files hold several pickles).
// `allow`, when given, is the only list of globals the pickle may name.
ValuePtr unpickle(const uint8_t* data, size_t size, const std::string& origin,
                  const PersistentLoader& persistent_load, size_t* consumed = nullptr,
                  const PickleAllowList* allow = nullptr);

}  // namespace ftx
