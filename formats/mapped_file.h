#pragma once
// A read-only memory map of a whole file. Readers take bounds-checked slices of it; nothing a file
// says about sizes or offsets is used before it is checked against size().
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ftx {

class MappedFile {
 public:
  // Throws Error("<path>: cannot open: <strerror>") when the file is missing or unreadable.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  // Maps the first `size` bytes of an open file (which this does not close); `label` names it in
  // errors. Used for scratch files that are already unlinked.
  static std::shared_ptr<MappedFile> map_fd(int fd, size_t size, const std::string& label);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  // Pointer to [offset, offset+length); throws Error naming `what` if that runs past the end.
  const uint8_t* slice(uint64_t offset, uint64_t length, const std::string& what) const;
  // Tells the kernel the pages of [offset, offset+length) are no longer needed, so that a scan
  // over a large file keeps its resident set small. Safe to call on any range.
  void release(uint64_t offset, uint64_t length) const;
  // Hints sequential read-ahead for a range about to be read.
  void will_need(uint64_t offset, uint64_t length) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ftx
