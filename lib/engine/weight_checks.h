#pragma once
// The checks every weight file gets at load, on the bytes the load maps anyway: values that are not
// finite (a corrupt or badly converted file would decode to garbage, not to an error) and, when
// manifest.json records one, the file's CRC-32 (a file changed after conversion). The bytes are
// split into pieces scanned on OpenMP's threads (the pieces' checksums are combined), so the pass
// runs at memory speed; bench/load-checks measures it against the load.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/dtype.h"
#include "formats/ft_manifest.h"

namespace ftx {

// Throws Error(path, ...) naming what is wrong; `listed` is the file's manifest.json record (or
// nullptr), `dir` the folder named in the hint to run `ftx inspect --verify`.
void check_weight_bytes(const std::string& path, const uint8_t* bytes, size_t nbytes, DType dtype,
                        const FtManifestEntry* listed, const std::string& dir);

}  // namespace ftx
