#pragma once
// The checksum of manifest.json: CRC-32 (zlib's polynomial, so Python's zlib.crc32 checks a file),
// computed with libdeflate's carry-less-multiply code, several times faster than zlib's: a
// conversion checksums every byte it writes.
#include <cstddef>
#include <cstdint>

namespace ftx {

uint32_t crc32_bytes(const void* data, size_t nbytes);
// The CRC-32 of earlier bytes (crc) extended by these: crc32_bytes over pieces, piece by piece.
uint32_t crc32_update(uint32_t crc, const void* data, size_t nbytes);
// The CRC-32 of A followed by B from crc(A), crc(B) and B's length (zlib's crc32_combine): pieces
// checksummed in parallel give the file's checksum.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

}  // namespace ftx
