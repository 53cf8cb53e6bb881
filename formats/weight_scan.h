#pragma once
// One pass over a weight file's bytes that finds what a size check cannot: values that are not
// finite (NaN, ±Inf: a corrupt or badly converted file) and, when asked, the CRC-32 that
// manifest.json records for the file. The bytes are taken in cache-sized chunks, each checksummed
// and scanned while it is in cache; the scan is a branch-free reduction the compiler vectorises.
#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace ftx {

struct WeightScan {
  uint32_t crc32 = 0;            // of all the bytes, when asked for
  int64_t nonfinite = 0;         // NaN or infinite values (floating-point dtypes only)
  int64_t first_nonfinite = -1;  // element index of the first one
};

// Floating-point dtypes are scanned for non-finite values (others only checksummed).
WeightScan scan_weight_bytes(const void* data, size_t nbytes, DType dtype, bool with_crc);

// Whether dtype has NaN/Inf encodings that scan_weight_bytes looks for.
bool scans_nonfinite(DType dtype);

}  // namespace ftx
