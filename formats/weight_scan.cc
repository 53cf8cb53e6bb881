#include "formats/weight_scan.h"

#include <algorithm>
#include <cstring>

#include "formats/checksum.h"

namespace ftx {

namespace {

// Non-finite means "exponent bits all ones" in IEEE formats (and E5M2); E4M3 (fn) has no infinity
// and one NaN pattern per sign, S.1111.111. The common case (none) is a branch-free OR-reduction
// the compiler vectorises: t = (x & mask) ^ mask is zero exactly for a non-finite x, and since the
// mask leaves the top bit clear, t - 1 has its top bit set exactly then. Only a chunk that has one
// is counted element by element.
template <typename Bits>
int64_t count_exponent_all_ones(const Bits* p, size_t n, Bits mask) {
  Bits any = 0;
  for (size_t i = 0; i < n; ++i) any |= static_cast<Bits>(((p[i] & mask) ^ mask) - 1);
  constexpr Bits kTop = static_cast<Bits>(Bits(1) << (8 * sizeof(Bits) - 1));
  if (!(any & kTop)) return 0;
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) count += (p[i] & mask) == mask;
  return count;
}

int64_t count_nonfinite(const uint8_t* p, size_t n_elems, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return count_exponent_all_ones(reinterpret_cast<const uint32_t*>(p), n_elems, uint32_t{0x7f800000u});
    case DType::kFloat64:
      return count_exponent_all_ones(reinterpret_cast<const uint64_t*>(p), n_elems, uint64_t{0x7ff0000000000000ull});
    case DType::kFloat16:
      return count_exponent_all_ones(reinterpret_cast<const uint16_t*>(p), n_elems, uint16_t{0x7c00});
    case DType::kBFloat16:
      return count_exponent_all_ones(reinterpret_cast<const uint16_t*>(p), n_elems, uint16_t{0x7f80});
    case DType::kFloat8E5M2:
      return count_exponent_all_ones(p, n_elems, uint8_t{0x7c});
    case DType::kFloat8E4M3:
      return count_exponent_all_ones(p, n_elems, uint8_t{0x7f});
    default:
      return 0;
  }
}

// The index of the first non-finite element in a chunk known to hold one (the slow path).
int64_t first_nonfinite_in(const uint8_t* p, size_t n_elems, DType dtype, size_t el) {
  for (size_t i = 0; i < n_elems; ++i)
    if (count_nonfinite(p + i * el, 1, dtype)) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace

bool scans_nonfinite(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kFloat64: case DType::kFloat16: case DType::kBFloat16:
    case DType::kFloat8E5M2: case DType::kFloat8E4M3:
      return true;
    default:
      return false;
  }
}

WeightScan scan_weight_bytes(const void* data, size_t nbytes, DType dtype, bool with_crc) {
  // 256 KiB: within L2 on every x86 server core, so the scan reads what the CRC just brought in.
  constexpr size_t kChunk = size_t(256) << 10;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const bool scan = scans_nonfinite(dtype);
  const size_t el = dtype_size(dtype);
  WeightScan out;
  for (size_t off = 0; off < nbytes; off += kChunk) {
    const size_t n = std::min(kChunk, nbytes - off);
    if (with_crc) out.crc32 = crc32_update(out.crc32, p + off, n);
    if (!scan) continue;
    const size_t whole = n / el * el;  // chunks are a multiple of every element size
    const int64_t bad = count_nonfinite(p + off, whole / el, dtype);
    if (bad && out.first_nonfinite < 0)
      out.first_nonfinite = static_cast<int64_t>(off / el) + first_nonfinite_in(p + off, whole / el, dtype, el);
    out.nonfinite += bad;
  }
  return out;
}

}  // namespace ftx
