#pragma once
// The central directory of a zip archive held in memory (a mapped file or a tar member), read
// without copying: torch checkpoints are zips of STORED members whose local headers use data
// descriptors, so sizes and offsets come from the central directory (Zip64 included). Every size
// and offset is checked against the archive's bytes before use.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ftx {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 STORED, 8 DEFLATE
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
};

class ZipDirectory {
 public:
  // Parses the directory of the zip in [data, data+size). Throws Error(origin, ...) when the bytes
  // are not a zip or the directory is damaged.
  ZipDirectory(const uint8_t* data, uint64_t size, std::string origin);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  // nullptr when absent (the first entry of that name wins).
  const ZipEntry* find(const std::string& name) const;
  // Offset of the member's first data byte within the archive, after reading its local header;
  // throws unless the member is STORED and lies wholly inside the archive.
  uint64_t stored_data_offset(const ZipEntry& e) const;

 private:
  const uint8_t* data_;
  uint64_t size_;
  std::string origin_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace ftx
