#include "lib/engine/weight_checks.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "formats/checksum.h"
#include "formats/error.h"
#include "formats/weight_scan.h"

namespace ftx {

void check_weight_bytes(const std::string& path, const uint8_t* bytes, size_t nbytes, DType dtype,
                        const FtManifestEntry* listed, const std::string& dir) {
  // Pieces of 8 MiB (a multiple of every element size): large enough that a thread's start-up is
  // noise, small enough that a layer's matrix spreads over the threads.
  constexpr size_t kPiece = size_t(8) << 20;
  const bool crc = listed && listed->crc32;
  const int64_t pieces = static_cast<int64_t>((nbytes + kPiece - 1) / kPiece);
  std::vector<WeightScan> part(static_cast<size_t>(pieces));
#pragma omp parallel for schedule(dynamic, 1) if (pieces > 1)
  for (int64_t i = 0; i < pieces; ++i) {
    const size_t off = static_cast<size_t>(i) * kPiece;
    part[i] = scan_weight_bytes(bytes + off, std::min(kPiece, nbytes - off), dtype, crc);
  }
  WeightScan all;
  const size_t el = dtype_size(dtype);
  for (int64_t i = 0; i < pieces; ++i) {
    const size_t off = static_cast<size_t>(i) * kPiece;
    all.crc32 = i == 0 ? part[0].crc32 : crc32_combine(all.crc32, part[i].crc32, std::min(kPiece, nbytes - off));
    if (part[i].nonfinite && all.first_nonfinite < 0)
      all.first_nonfinite = static_cast<int64_t>(off / el) + part[i].first_nonfinite;
    all.nonfinite += part[i].nonfinite;
  }
  if (crc && all.crc32 != *listed->crc32) {
    char got[16], want[16];
    std::snprintf(got, sizeof got, "%08x", all.crc32);
    std::snprintf(want, sizeof want, "%08x", *listed->crc32);
    throw Error(path, std::string("checksum ") + got + ", manifest.json says " + want +
                          ": the file changed after conversion (`ftx inspect --verify " + dir +
                          "` checks every file; if the change is meant, convert again or delete manifest.json)");
  }
  if (all.nonfinite)
    throw Error(path, std::to_string(all.nonfinite) + " non-finite value" + (all.nonfinite == 1 ? "" : "s") +
                          " (NaN or Inf; the first at element " + std::to_string(all.first_nonfinite) +
                          "): the file is corrupt; convert the model again");
}

}  // namespace ftx
