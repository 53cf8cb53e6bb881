#pragma once
// A .nemo archive: a tar (ustar, GNU or pax), plain or gzip-compressed (detected by the 1f 8b magic,
// never by the file name). Plain tar members are zero-copy views into the mapped archive. A gzip
// archive is inflated in one streaming pass, never extracted to disk; the members the caller wants
// (see MemberFilter) are kept in memory, the rest are skipped.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/tensor.h"

namespace ftx {

struct TarEntry {
  std::string name;     // normalised: no leading "./" or "/", no trailing "/"
  uint64_t size = 0;    // data bytes (0 for folders and links)
  char type = '0';      // tar typeflag: '0' file, '5' folder, '1'/'2' link, ...
  bool is_file() const { return type == '0'; }
};

class TarArchive {
 public:
  // Decides, for a gzip archive, which regular-file members are kept in memory (name, size).
  // Plain tar archives keep every member at no cost, whatever the filter says.
  using MemberFilter = std::function<bool(const std::string& name, uint64_t size)>;

  // Opens and indexes the archive at `path`. A null filter keeps every member.
  // Throws Error(path, ...) for a file that is not a tar, a bad header (checksum, size field), a
  // member that runs past the end of the archive, or a truncated/corrupt gzip stream.
  static std::shared_ptr<TarArchive> open(const std::string& path, const MemberFilter& keep = nullptr);
  // The same over bytes already in memory or mapped (bytes.origin names them in errors).
  static std::shared_ptr<TarArchive> from_bytes(const Storage& bytes, const MemberFilter& keep = nullptr);
  // True when the bytes start with the gzip magic.
  static bool is_gzip(const uint8_t* data, size_t size);
  // True when the first 512 bytes are a tar header with a valid checksum.
  static bool looks_like_tar(const uint8_t* data, size_t size);

  const std::string& path() const { return path_; }
  bool compressed() const { return compressed_; }
  // Every member in archive order (folders and links included). Later duplicates of a name replace
  // earlier ones on lookup, as tar extraction would.
  const std::vector<TarEntry>& entries() const { return entries_; }
  bool has(const std::string& name) const;
  // True when the member exists and its bytes are available (always for plain tar).
  bool loaded(const std::string& name) const;
  // The bytes of a regular-file member; origin "<archive>:<member>". Throws Error when the member
  // is missing, not a regular file, or was not kept by the filter of a gzip archive.
  Storage member(const std::string& name) const;
  // Names of regular-file members matching a shell pattern (fnmatch with FNM_PATHNAME, so `*` does
  // not cross '/': "*.yaml" matches only top-level members, like a non-recursive glob).
  std::vector<std::string> find(const std::string& pattern) const;

  // Strips leading "./" and "/" components and trailing "/" ("./a//b/" -> "a/b").
  static std::string normalise_name(const std::string& raw);

 private:
  struct Item {
    TarEntry entry;
    Storage bytes;  // empty data when not kept
    bool kept = false;
  };
  const Item* find_item(const std::string& name) const;

  std::string path_;
  bool compressed_ = false;
  std::vector<TarEntry> entries_;
  std::vector<Item> items_;
  friend class TarIndexer;
};

}  // namespace ftx
