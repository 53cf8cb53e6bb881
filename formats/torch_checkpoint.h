#pragma once
// PyTorch checkpoints, zip (torch >= 1.6) and legacy (pre-zip) formats. Tensors are views into the
// given bytes (a mapped file, or a tar member), never copied.
#include <string>

#include "formats/tensor.h"
#include "formats/value.h"

namespace ftx {

// True when the bytes look like a torch checkpoint (zip magic or legacy pickle magic).
bool is_torch_checkpoint(const uint8_t* data, size_t size);

// Loads the object tree of a checkpoint whose bytes are `bytes` (bytes.origin names it for errors).
ValuePtr load_torch_checkpoint(const Storage& bytes);
// Maps the file and loads it.
ValuePtr load_torch_checkpoint(const std::string& path);

}  // namespace ftx
