#pragma once
// TensorView: a typed, strided view into bytes that some reader owns (a mapped file, a member of a
// tar, a buffer decompressed from gzip). Views never copy; `keep_alive` holds the owner.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/mapped_file.h"

namespace ftx {

// Raw bytes of one storage (torch storage, safetensors data block, npy payload, .bin file).
struct Storage {
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  std::shared_ptr<const void> keep_alive;   // owner of `data`
  std::shared_ptr<const MappedFile> file;   // set when `data` lies in a mapped file
  uint64_t file_offset = 0;                 // offset of `data` within `file`
  std::string origin;                       // path (or path:member) for error messages
};

// The whole of a mapped file as one Storage (keeps the mapping alive; origin = its path).
Storage file_storage(const std::shared_ptr<const MappedFile>& file);
// The bytes [offset, offset+length) of `outer`, keeping its owner and file position (a member of a
// zip archive); the caller has checked the range against outer.nbytes.
Storage sub_storage(const Storage& outer, uint64_t offset, uint64_t length, std::string origin);

struct TensorView {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty means C-contiguous
  int64_t offset = 0;            // in elements, from storage.data
  Storage storage;

  int64_t numel() const;
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * dtype_size(dtype); }
  std::vector<int64_t> contiguous_strides() const;
  const std::vector<int64_t>& effective_strides(std::vector<int64_t>& tmp) const;
  bool is_contiguous() const;
  // Checks that every element addressed by shape/strides/offset lies inside the storage.
  // Throws Error naming `name` and the storage's origin otherwise. Readers call it on creation.
  void validate(const std::string& name) const;
  // Pointer to the first element (valid only after validate()).
  const uint8_t* data() const { return storage.data + offset * static_cast<int64_t>(dtype_size(dtype)); }
  // Copies the elements in C order into `out` (resized to nbytes()).
  void copy_contiguous(std::vector<uint8_t>& out) const;
  // Calls fn(pointer to element) for every element in C order.
  void for_each_element(const std::function<void(const uint8_t*)>& fn) const;
  // Releases the mapped pages under this tensor's bytes (no-op when not file-backed).
  void release_pages() const;
};

std::string shape_to_string(const std::vector<int64_t>& shape);  // "[2, 3]"

// float64 statistics of a tensor, as `ftx inspect --stats` prints them.
struct TensorStats {
  double sum = 0, abs_sum = 0, min = 0, max = 0;
};
TensorStats compute_stats(const TensorView& t);

}  // namespace ftx
