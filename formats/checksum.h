#pragma once
// The checksum of manifest.json: CRC-32 (zlib's polynomial, so Python's zlib.crc32 checks a file),
// computed with libdeflate's carry-less-multiply code, several times faster than zlib's: a
// conversion checksums every byte it writes.
#include <cstddef>
#include <cstdint>

namespace ftx {

uint32_t crc32_bytes(const void* data, size_t nbytes);

}  // namespace ftx
