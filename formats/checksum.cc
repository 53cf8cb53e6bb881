#include "formats/checksum.h"

#include <libdeflate.h>

namespace ftx {

uint32_t crc32_bytes(const void* data, size_t nbytes) { return libdeflate_crc32(0, data, nbytes); }

}  // namespace ftx
