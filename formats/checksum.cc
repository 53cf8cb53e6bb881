#include "formats/checksum.h"

#include <libdeflate.h>
#include <zlib.h>

namespace ftx {

uint32_t crc32_bytes(const void* data, size_t nbytes) { return libdeflate_crc32(0, data, nbytes); }

uint32_t crc32_update(uint32_t crc, const void* data, size_t nbytes) { return libdeflate_crc32(crc, data, nbytes); }

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return static_cast<uint32_t>(::crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(length_b)));
}

}  // namespace ftx
