#pragma once
// `ftx inspect --verify`: an FT model folder checked before it is deployed. config.ini as a whole,
// every weight file's size against config.ini, and every file manifest.json lists against its
// record: size, CRC-32, and values that are not finite. A folder without manifest.json (FT's own
// converters write none) is checked against config.ini alone, values included.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ftx {

struct VerifiedFile {
  std::string file;     // name in the folder
  std::string problem;  // "" when the file is as recorded
};

struct FolderVerification {
  std::vector<VerifiedFile> files;  // in manifest (else layout) order
  bool has_manifest = false;
  bool has_checksums = false;       // the manifest records CRC-32s
  uint64_t bytes = 0;               // bytes read
  int64_t failed() const;
};

// Errors in config.ini, or a folder that is not an FT model folder, are thrown (Error). Every file
// problem is collected. `on_file` (optional) is called after each file. Without `with_data` only
// presence and sizes are checked (nothing is read).
FolderVerification verify_ft_folder(const std::string& dir,
                                    const std::function<void(const VerifiedFile&)>& on_file = nullptr,
                                    bool with_data = true);

}  // namespace ftx
