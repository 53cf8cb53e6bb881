#include "formats/npz.h"

#include <string>

#include "formats/error.h"
#include "formats/npy.h"
#include "formats/zip_directory.h"

namespace ftx {

std::vector<NamedTensor> read_npz(const Storage& bytes, bool void2_is_bfloat16) {
  const std::string& origin = bytes.origin;
  if (bytes.nbytes < 4 || bytes.data[0] != 'P' || bytes.data[1] != 'K')
    throw Error(origin, "not an .npz file (no zip signature; np.savez writes a zip archive)");
  ZipDirectory zip(bytes.data, bytes.nbytes, origin);
  std::vector<NamedTensor> out;
  for (const ZipEntry& e : zip.entries()) {
    const std::string where = origin + ":" + e.name;
    const std::string suffix = ".npy";
    if (e.name.size() <= suffix.size() || e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      throw Error(where, "member is not a .npy array (an .npz holds only .npy members)");
    if (e.method != 0)
      throw Error(where, "member is compressed (zip method " + std::to_string(e.method) +
                             ", np.savez_compressed); ftx reads np.savez archives, whose members are stored");
    Storage s = sub_storage(bytes, zip.stored_data_offset(e), e.size, where);
    out.push_back({e.name.substr(0, e.name.size() - suffix.size()), read_npy(s, void2_is_bfloat16)});
  }
  return out;
}

}  // namespace ftx
