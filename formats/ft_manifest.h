#pragma once
// manifest.json beside an FT folder's files (ftx's converters write it; docs/ft-layout.md): for
// each file its tensor, rank, dtype, shape, size and CRC-32. Loaders check sizes against it and
// checksums where that is cheap; `ftx inspect --verify` checks everything.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace ftx {

struct FtManifestEntry {
  std::string file;               // a plain file name in the folder
  std::string tensor;             // "" when not recorded
  std::optional<DType> dtype;
  std::vector<int64_t> shape;
  int64_t bytes = -1;             // -1 when not recorded
  std::optional<uint32_t> crc32;  // ftx's manifests have one for every file
};

struct FtManifest {
  std::string path;  // DIR/manifest.json
  std::vector<FtManifestEntry> files;
  const FtManifestEntry* find(const std::string& file) const;
};

// DIR/manifest.json, or nullopt when there is none. Accepted shapes: ftx's {"files": [{"file",
// "tensor", "dtype", "shape", "bytes", "crc32"}, ...]}, and other tools' {"files": [{"name"|"path",
// "size"|"nbytes"}]} or {"files": {"<file>": {"bytes": n} | n}}. Error(path) for invalid JSON or a
// file name that is not a plain name in the folder (an unknown dtype is left unset: checked byte-wise).
std::optional<FtManifest> read_ft_manifest(const std::string& dir);

// What is wrong with one listed file ("" when nothing): missing, not the recorded size, not the
// recorded checksum, non-finite values. `with_data`: read the bytes (checksum and values), else
// sizes only.
std::string check_manifest_file(const std::string& dir, const FtManifestEntry& entry, bool with_data,
                                uint64_t* bytes_read = nullptr);

}  // namespace ftx
