#pragma once
// PyTorch Distributed Checkpoint (DCP) folders, the format of Megatron Core's torch_dist
// checkpoints and of NeMo's distributed model_weights/: `.metadata` is a pickled Metadata
// dataclass naming, per tensor, its global shape and dtype and its chunks (offsets and sizes in the
// global tensor), and per chunk the `.distcp` file, byte offset and length where the chunk is stored
// as one torch.save archive. Entries that are not tensors (BytesStorageMetadata: pickled Python
// objects) are listed by name only.
//
// Nothing a file says is trusted: `.metadata` is read by the safe unpickler with an allow-list of
// exactly the classes DCP writes there, every chunk must lie inside its file and its tensor, and a
// chunk archive's own tensor must have the chunk's shape and dtype. Chunks are views into the
// mapped files, parsed only when a tensor is asked for, so a reader touches only what it uses.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/tensor.h"

namespace ftx {

// One chunk of a global tensor: where it lies in the tensor and in which file.
struct DcpChunk {
  std::vector<int64_t> offsets, sizes;  // in the global tensor, one per axis
  std::string file;                     // relative path of the .distcp file
  uint64_t file_offset = 0, length = 0; // the torch.save archive's bytes in that file
};

struct DcpTensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;           // global
  std::vector<DcpChunk> chunks;         // in .metadata's order
};

// A chunk's elements: a view of shape `sizes` into its mapped file.
struct DcpChunkView {
  std::vector<int64_t> offsets;
  TensorView view;
};

class DcpCheckpoint {
 public:
  // Returns a file of the checkpoint by its relative name (".metadata", "__0_0.distcp"); throws
  // Error naming it when it is missing. A folder maps its files; a tar member is a Storage too.
  using FileOpener = std::function<Storage(const std::string& name)>;

  // Reads `.metadata`. `origin` names the checkpoint (the folder) in errors.
  DcpCheckpoint(const std::string& origin, FileOpener open);
  // A checkpoint folder on disk.
  static DcpCheckpoint open_dir(const std::string& dir);

  const std::string& origin() const { return origin_; }
  // Tensor entries, by name (sorted).
  const std::map<std::string, DcpTensorInfo>& tensors() const { return tensors_; }
  // Names of the non-tensor (bytes) entries.
  const std::vector<std::string>& byte_entries() const { return bytes_; }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  const DcpTensorInfo& info(const std::string& name) const;

  // The chunks of a tensor as views, in .metadata's order, after checking that they lie inside
  // their files and tile the global tensor exactly (no gap, no overlap). Error otherwise.
  std::vector<DcpChunkView> chunks(const std::string& name) const;

 private:
  Storage file(const std::string& name) const;
  std::string origin_;
  FileOpener open_;
  std::map<std::string, DcpTensorInfo> tensors_;
  std::vector<std::string> bytes_;
  mutable std::map<std::string, Storage> files_;  // opened .distcp files, by name
};

// True when `dir` holds a `.metadata` file (a DCP checkpoint folder).
bool is_dcp_dir(const std::string& dir);

}  // namespace ftx
