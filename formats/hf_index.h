#pragma once
// HuggingFace weight files: the shard index (`model.safetensors.index.json`,
// `pytorch_model.bin.index.json`: {"metadata": {"total_size"}, "weight_map": {tensor: file}}),
// which weight files a model folder holds, and git-lfs pointer files standing in for weights.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ftx {

struct HfIndex {
  std::string path;  // the index file
  // tensor name -> shard file name (relative to the index's folder), in file order.
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::vector<std::string> files;  // distinct shard paths (folder/name), in first-appearance order
  bool has_total_size = false;
  uint64_t total_size = 0;         // metadata.total_size when present
};

// Throws Error(path, ...) for bad JSON, a missing/empty weight_map, or a shard name that is not a
// plain file name in the index's folder (absolute, "..", or a sub-folder path).
HfIndex read_hf_index(const std::string& index_path);
HfIndex parse_hf_index(const std::string& json_text, const std::string& index_path);

// Which weight files a HuggingFace model folder holds, in transformers' order of preference:
// model.safetensors, model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json.
struct HfWeightFiles {
  std::string format;              // "safetensors" or "torch"
  std::string index_path;          // empty for a single file
  std::vector<std::string> files;  // full paths
};
// Throws Error(folder, ...) listing what was looked for when none is there.
HfWeightFiles find_hf_weight_files(const std::string& folder);
// The weights `path` names: the folder's (as above) for a folder or its config.json; else the one
// file named (a .safetensors or .bin file, or a shard index), whatever else the folder holds. Error
// naming the path when it does not exist, is one shard of a sharded checkpoint, or is no weight file.
HfWeightFiles hf_weight_files_at(const std::string& path);
// The folder of an HF model given as `path`: the path itself, or the folder of a file named in it.
// Error naming the path when it does not exist.
std::string hf_model_folder(const std::string& path);

// git-lfs pointer files start with "version https://git-lfs".
bool is_git_lfs_pointer(const uint8_t* data, size_t size);
// Throws Error(path, "is a git-lfs pointer ... run `git lfs pull`") when the bytes are one.
void check_not_git_lfs_pointer(const uint8_t* data, size_t size, const std::string& path);

}  // namespace ftx
