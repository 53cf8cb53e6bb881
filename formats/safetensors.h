#pragma once
// safetensors files: u64 LE header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [b, e]}, "__metadata__": {str: str}}), then the data.
// Tensors are zero-copy views into the mapped file; every offset is checked before use.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "formats/value.h"

namespace ftx {

using SafetensorsMetadata = std::map<std::string, std::string>;

// Reads one .safetensors file. Tensors come in data order (ascending begin offset). `metadata`,
// when given, receives `__metadata__`. Throws Error(path, ...) on any inconsistency, e.g.
// "<path>: tensor 'x' data_offsets [b, e] out of range (...)"; a git-lfs pointer file is named as such.
std::vector<NamedTensor> read_safetensors(const std::string& path, SafetensorsMetadata* metadata = nullptr);
// The same over bytes already mapped or in memory (bytes.origin names them in errors).
std::vector<NamedTensor> read_safetensors(const Storage& bytes, SafetensorsMetadata* metadata = nullptr);

// A sharded checkpoint: `index_path` is a model.safetensors.index.json. Every shard is loaded and
// every name in weight_map must exist in its shard; a name in two shards is an Error. Tensors come
// shard by shard in the index's first-appearance order. `metadata` receives the first shard's.
std::vector<NamedTensor> read_safetensors_sharded(const std::string& index_path,
                                                  SafetensorsMetadata* metadata = nullptr);

// True when the bytes plausibly start a safetensors file (length fits, JSON object follows).
bool is_safetensors(const uint8_t* data, size_t size);

// "F16" -> kFloat16 etc.; throws Error for an unknown spelling.
DType safetensors_dtype(const std::string& name);
const char* safetensors_dtype_name(DType t);

}  // namespace ftx
