#include "formats/zip_directory.h"

#include <algorithm>
#include <utility>

#include "formats/error.h"

namespace ftx {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kEndSize = 22, kZip64LocatorSize = 20, kZip64EndSize = 56, kCentralHeaderSize = 46,
                   kLocalHeaderSize = 30;

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

}  // namespace

ZipDirectory::ZipDirectory(const uint8_t* data, uint64_t size, std::string origin)
    : data_(data), size_(size), origin_(std::move(origin)) {
  auto fail = [&](const std::string& what) { throw Error(origin_, "damaged zip: " + what); };
  auto in_bounds = [&](uint64_t off, uint64_t len) { return off <= size_ && len <= size_ - off; };

  // End of central directory: the last EOCD signature whose fixed part fits (a comment may follow).
  if (size_ < kEndSize) fail("too short for a zip (" + std::to_string(size_) + " bytes)");
  uint64_t eocd = UINT64_MAX;
  const uint64_t lowest = size_ - kEndSize > 0xFFFF ? size_ - kEndSize - 0xFFFF : 0;
  for (uint64_t p = size_ - kEndSize + 1; p-- > lowest;) {
    if (le(data_ + p, 4) == kEndSig && p + kEndSize + le(data_ + p + 20, 2) <= size_) {
      eocd = p;
      break;
    }
  }
  if (eocd == UINT64_MAX) fail("no end-of-central-directory record (truncated file?)");
  uint64_t count = le(data_ + eocd + 10, 2);
  uint64_t cd_size = le(data_ + eocd + 12, 4);
  uint64_t cd_offset = le(data_ + eocd + 16, 4);

  // Zip64: a locator right before the EOCD points at the Zip64 EOCD record with 64-bit fields.
  if (eocd >= kZip64LocatorSize && le(data_ + eocd - kZip64LocatorSize, 4) == kZip64LocatorSig) {
    const uint64_t rec = le(data_ + eocd - kZip64LocatorSize + 8, 8);
    if (!in_bounds(rec, kZip64EndSize) || le(data_ + rec, 4) != kZip64EndSig)
      fail("Zip64 end record at byte " + std::to_string(rec) + " is missing or out of range");
    count = le(data_ + rec + 32, 8);
    cd_size = le(data_ + rec + 40, 8);
    cd_offset = le(data_ + rec + 48, 8);
  } else if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu) {
    fail("Zip64 sizes without a Zip64 end record");
  }
  if (!in_bounds(cd_offset, cd_size))
    fail("central directory (bytes " + std::to_string(cd_offset) + "+" + std::to_string(cd_size) +
         ") runs past the end of the " + std::to_string(size_) + "-byte file");
  if (count > cd_size / kCentralHeaderSize)
    fail(std::to_string(count) + " entries cannot fit a " + std::to_string(cd_size) + "-byte central directory");

  entries_.reserve(static_cast<size_t>(count));
  uint64_t p = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  for (uint64_t k = 0; k < count; ++k) {
    if (p > cd_end || cd_end - p < kCentralHeaderSize || le(data_ + p, 4) != kCentralHeaderSig)
      fail("central directory entry " + std::to_string(k) + " at byte " + std::to_string(p) + " is damaged");
    const uint8_t* h = data_ + p;
    ZipEntry e;
    e.method = static_cast<uint16_t>(le(h + 10, 2));
    e.compressed_size = le(h + 20, 4);
    e.size = le(h + 24, 4);
    const uint64_t name_len = le(h + 28, 2), extra_len = le(h + 30, 2), comment_len = le(h + 32, 2);
    e.local_header_offset = le(h + 42, 4);
    const uint64_t var_len = name_len + extra_len + comment_len;
    if (cd_end - p - kCentralHeaderSize < var_len)
      fail("central directory entry " + std::to_string(k) + " runs past the directory");
    e.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), static_cast<size_t>(name_len));
    // Zip64 extended information (id 1): 64-bit values for the fields saturated above, in order.
    const uint8_t* x = h + kCentralHeaderSize + name_len;
    for (uint64_t q = 0; q + 4 <= extra_len;) {
      const uint64_t id = le(x + q, 2), len = le(x + q + 2, 2);
      if (q + 4 + len > extra_len) fail("extra field of '" + e.name + "' runs past its entry");
      if (id == 1) {
        const uint8_t* f = x + q + 4;
        uint64_t used = 0;
        auto take = [&](uint64_t& field) {
          if (used + 8 > len) fail("Zip64 extra field of '" + e.name + "' is too short");
          field = le(f + used, 8);
          used += 8;
        };
        if (e.size == 0xFFFFFFFFu) take(e.size);
        if (e.compressed_size == 0xFFFFFFFFu) take(e.compressed_size);
        if (e.local_header_offset == 0xFFFFFFFFu) take(e.local_header_offset);
      }
      q += 4 + len;
    }
    p += kCentralHeaderSize + var_len;
    by_name_.emplace(e.name, entries_.size());
    entries_.push_back(std::move(e));
  }
}

const ZipEntry* ZipDirectory::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

uint64_t ZipDirectory::stored_data_offset(const ZipEntry& e) const {
  const std::string where = origin_ + ":" + e.name;
  if (e.method != 0)
    throw Error(where, "member is compressed (zip method " + std::to_string(e.method) +
                           "); torch checkpoints store their members uncompressed");
  if (e.compressed_size != e.size)
    throw Error(where, "stored member has compressed size " + std::to_string(e.compressed_size) +
                           " but size " + std::to_string(e.size));
  const uint64_t h = e.local_header_offset;
  if (h > size_ || size_ - h < kLocalHeaderSize || le(data_ + h, 4) != kLocalHeaderSig)
    throw Error(where, "damaged zip: no local header at byte " + std::to_string(h));
  const uint64_t start = h + kLocalHeaderSize + le(data_ + h + 26, 2) + le(data_ + h + 28, 2);
  if (start > size_ || e.size > size_ - start)
    throw Error(where, "member data (bytes " + std::to_string(start) + "+" + std::to_string(e.size) +
                           ") runs past the end of the " + std::to_string(size_) + "-byte file (truncated?)");
  return start;
}

}  // namespace ftx
