#include "formats/tar_archive.h"

#include <fnmatch.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "formats/error.h"

namespace ftx {

namespace {

constexpr size_t kBlock = 512;
// GNU long names and pax headers are read into memory; anything larger is not a real header.
constexpr uint64_t kMaxMetaSize = 1 << 20;
// Deflate cannot expand one input byte to more than 1032 output bytes; used to cap reservations
// so that a lying size field never reserves more memory than the stream could ever produce.
constexpr uint64_t kMaxDeflateRatio = 1032;

std::string printable(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && p[i]; ++i) {
    unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      s += "\\x";
      s += hex[c >> 4];
      s += hex[c & 15];
    }
  }
  return s;
}

// The tar stream, uncompressed: either a range of mapped/owned bytes or an inflating gzip reader.
class TarSource {
 public:
  virtual ~TarSource() = default;
  // Copies up to n bytes; fewer only at the end of the stream.
  virtual size_t read(uint8_t* dst, size_t n) = 0;
  // Skips up to n bytes; returns how many were skipped.
  virtual uint64_t skip(uint64_t n) = 0;
  // The next n bytes as a Storage (a view when possible); nbytes < n when the stream ends first.
  virtual Storage take(uint64_t n, const std::string& origin) = 0;
  virtual uint64_t position() const = 0;
  // Describes the end of the stream for "runs past the end" messages.
  virtual std::string size_text() const = 0;
  // Reads to the end so that a truncated or corrupt stream is reported even past the tar's end.
  virtual void finish() {}
};

class PlainSource : public TarSource {
 public:
  explicit PlainSource(const Storage& bytes) : bytes_(bytes) {}
  size_t read(uint8_t* dst, size_t n) override {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n, bytes_.nbytes - pos_));
    if (k) std::memcpy(dst, bytes_.data + pos_, k);
    pos_ += k;
    return k;
  }
  uint64_t skip(uint64_t n) override {
    uint64_t k = std::min<uint64_t>(n, bytes_.nbytes - pos_);
    pos_ += k;
    return k;
  }
  Storage take(uint64_t n, const std::string& origin) override {
    Storage s;
    s.data = bytes_.data + pos_;
    s.nbytes = std::min<uint64_t>(n, bytes_.nbytes - pos_);
    s.keep_alive = bytes_.keep_alive;
    s.file = bytes_.file;
    s.file_offset = bytes_.file_offset + pos_;
    s.origin = origin;
    pos_ += s.nbytes;
    return s;
  }
  uint64_t position() const override { return pos_; }
  std::string size_text() const override { return "archive has " + std::to_string(bytes_.nbytes) + " bytes"; }

 private:
  Storage bytes_;
  uint64_t pos_ = 0;
};

class GzipSource : public TarSource {
 public:
  GzipSource(const Storage& bytes, const std::string& path) : bytes_(bytes), path_(path), buf_(1 << 16) {
    std::memset(&z_, 0, sizeof(z_));
    // 16 + MAX_WBITS: gzip wrapper only; zlib checks the CRC32 and length trailer itself.
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) throw Error(path_, "cannot initialise zlib");
    z_.next_in = const_cast<Bytef*>(bytes_.data);
    avail_in_ = bytes_.nbytes;
    feed();
  }
  ~GzipSource() override { inflateEnd(&z_); }

  size_t read(uint8_t* dst, size_t n) override {
    size_t done = 0;
    while (done < n && fill()) {
      size_t k = std::min(n - done, have_ - at_);
      std::memcpy(dst + done, buf_.data() + at_, k);
      at_ += k;
      done += k;
    }
    pos_ += done;
    return done;
  }
  uint64_t skip(uint64_t n) override {
    uint64_t done = 0;
    while (done < n && fill()) {
      uint64_t k = std::min<uint64_t>(n - done, have_ - at_);
      at_ += static_cast<size_t>(k);
      done += k;
    }
    pos_ += done;
    return done;
  }
  Storage take(uint64_t n, const std::string& origin) override {
    if (n >= kSpillBytes) return spill(n, origin);
    auto owned = std::make_shared<std::vector<uint8_t>>();
    const uint64_t producible = (avail_in_ + z_.avail_in) * kMaxDeflateRatio + (have_ - at_) + 64;
    owned->reserve(static_cast<size_t>(std::min(n, producible)));
    uint64_t done = 0;
    while (done < n && fill()) {
      size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, have_ - at_));
      owned->insert(owned->end(), buf_.data() + at_, buf_.data() + at_ + k);
      at_ += k;
      done += k;
    }
    pos_ += done;
    Storage s;
    s.data = owned->data();
    s.nbytes = owned->size();
    s.origin = origin;
    s.keep_alive = std::move(owned);
    return s;
  }
  uint64_t position() const override { return pos_; }
  std::string size_text() const override {
    return "the gzip stream ends at " + std::to_string(pos_) + " uncompressed bytes";
  }

  // Members this large (model weights) are inflated into an unlinked file under $TMPDIR (else
  // /tmp) and mapped from there: they then live in the page cache, not in the process's memory,
  // and their pages can be released tensor by tensor like those of a plain tar.
  static constexpr uint64_t kSpillBytes = uint64_t(64) << 20;
  void finish() override {
    while (fill()) at_ = have_;
  }

 private:
  Storage spill(uint64_t n, const std::string& origin) {
    const char* env = std::getenv("TMPDIR");
    const std::string dir = env && *env ? env : "/tmp";
    std::string name = dir + "/ftx-inflate-XXXXXX";
    int fd = ::mkstemp(&name[0]);
    if (fd < 0) throw Error(dir, std::string("cannot create a scratch file to inflate ") + origin + ": " + std::strerror(errno));
    ::unlink(name.c_str());  // gone from the folder now, freed when the mapping and fd are
    struct FdCloser {
      int fd;
      ~FdCloser() { ::close(fd); }
    } closer{fd};
    uint64_t done = 0;
    while (done < n && fill()) {
      size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, have_ - at_));
      for (size_t off = 0; off < k;) {
        ssize_t w = ::write(fd, buf_.data() + at_ + off, k - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
          throw Error(name, "cannot write the inflated " + origin + " (" + std::to_string(n) + " bytes; set TMPDIR to a " +
                                "folder with room): " + std::strerror(w < 0 ? errno : EIO));
        off += static_cast<size_t>(w);
      }
      at_ += k;
      done += k;
    }
    pos_ += done;
    Storage s;
    auto file = MappedFile::map_fd(fd, static_cast<size_t>(done), origin);
    s.data = file->data();
    s.nbytes = done;
    s.origin = origin;
    s.file = file;
    s.file_offset = 0;
    s.keep_alive = file;
    return s;
  }

  // zlib takes at most 4 GiB of input per call (uInt); larger inputs are fed in slices.
  void feed() {
    uInt k = static_cast<uInt>(std::min<uint64_t>(avail_in_, 1u << 30));
    z_.avail_in += k;
    avail_in_ -= k;
  }
  // Makes buffered bytes available; false at the true end of the gzip data.
  bool fill() {
    while (at_ == have_) {
      if (ended_) return false;
      if (z_.avail_in == 0) feed();
      z_.next_out = buf_.data();
      z_.avail_out = static_cast<uInt>(buf_.size());
      int rc = inflate(&z_, Z_NO_FLUSH);
      at_ = 0;
      have_ = buf_.size() - z_.avail_out;
      release_consumed_input();
      if (rc == Z_STREAM_END) {
        // A gzip file may hold several members back to back; trailing zero padding is ignored.
        if (z_.avail_in < 2) feed();
        if (z_.avail_in >= 2 && z_.next_in[0] == 0x1f && z_.next_in[1] == 0x8b) {
          inflateReset(&z_);
        } else {
          ended_ = true;
        }
      } else if (rc == Z_BUF_ERROR && z_.avail_in == 0 && avail_in_ == 0) {
        // No progress possible and no input left: the file stops inside the stream.
        throw Error(path_, "truncated gzip stream (all " + std::to_string(bytes_.nbytes) +
                               " compressed bytes read after " + std::to_string(pos_) +
                               " uncompressed bytes, no end-of-stream marker)");
      } else if (rc != Z_OK) {
        throw Error(path_, std::string("corrupt gzip stream: ") +
                               (z_.msg ? std::string(z_.msg) : "inflate error " + std::to_string(rc)) +
                               " (after " + std::to_string(pos_) + " uncompressed bytes)");
      }
    }
    return true;
  }

  // The compressed file is read once, front to back: drop its mapped pages behind zlib, or a
  // multi-GB .nemo would end up wholly resident.
  void release_consumed_input() {
    if (!bytes_.file) return;
    const uint64_t consumed = static_cast<uint64_t>(z_.next_in - bytes_.data);
    if (consumed - released_ < kReleaseStep) return;
    bytes_.file->release(bytes_.file_offset + released_, consumed - released_);
    released_ = consumed;
  }
  static constexpr uint64_t kReleaseStep = uint64_t(16) << 20;

  Storage bytes_;
  uint64_t released_ = 0;  // compressed bytes whose pages were released
  std::string path_;
  z_stream z_;
  uint64_t avail_in_ = 0;  // input not yet handed to zlib
  std::vector<uint8_t> buf_;
  size_t at_ = 0, have_ = 0;
  uint64_t pos_ = 0;
  bool ended_ = false;
};

// Parses a numeric header field: octal text (NUL/space padded) or GNU base-256.
bool parse_number(const uint8_t* f, size_t n, uint64_t* out) {
  if (f[0] == 0x80 || f[0] == 0xff) {
    if (f[0] == 0xff) return false;  // negative
    uint64_t v = 0;
    for (size_t i = 1; i < n; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | f[i];
    }
    *out = v;
    return true;
  }
  size_t end = 0;
  while (end < n && f[end] != 0) ++end;
  size_t b = 0, e = end;
  while (b < e && (f[b] == ' ')) ++b;
  while (e > b && (f[e - 1] == ' ')) --e;
  uint64_t v = 0;
  for (size_t i = b; i < e; ++i) {
    if (f[i] < '0' || f[i] > '7') return false;
    if (v >> 60) return false;
    v = v * 8 + (f[i] - '0');
  }
  *out = v;
  return true;
}

bool checksum_ok(const uint8_t* h, uint64_t* stored, uint64_t* computed) {
  if (!parse_number(h + 148, 8, stored)) return false;
  uint64_t u = 0;
  int64_t s = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    uint8_t c = (i >= 148 && i < 156) ? ' ' : h[i];
    u += c;
    s += static_cast<int8_t>(c);
  }
  *computed = u;
  // Some old writers summed signed chars; tar readers accept both.
  return *stored == u || static_cast<int64_t>(*stored) == s;
}

std::string field_string(const uint8_t* f, size_t n) {
  size_t e = 0;
  while (e < n && f[e]) ++e;
  return std::string(reinterpret_cast<const char*>(f), e);
}

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

}  // namespace

// Walks the tar stream once and fills the archive's index.
class TarIndexer {
 public:
  TarIndexer(TarArchive& ar, TarSource& src, const TarArchive::MemberFilter& keep)
      : ar_(ar), src_(src), keep_(keep) {}

  void run() {
    uint8_t h[kBlock];
    std::string long_name, pax_path;
    bool have_pax_size = false;
    uint64_t pax_size = 0;
    while (true) {
      const uint64_t at = src_.position();
      size_t got = src_.read(h, kBlock);
      if (got == 0) break;  // end of data without the zero blocks: accepted, as tar readers do
      if (got < kBlock && at == 0)
        throw Error(ar_.path_, "not a tar archive (" + std::to_string(got) + " bytes, less than one 512-byte header)");
      if (got < kBlock)
        throw Error(ar_.path_, "truncated tar header at offset " + std::to_string(at) + " (" +
                                   std::to_string(got) + " of 512 bytes)");
      if (all_zero(h, kBlock)) break;  // end-of-archive marker
      uint64_t stored = 0, computed = 0;
      if (!checksum_ok(h, &stored, &computed))
        throw Error(ar_.path_, "tar header at offset " + std::to_string(at) + " has a bad checksum (stored '" +
                                   printable(h + 148, 8) + "', computed " + std::to_string(computed) +
                                   ")" + (at == 0 ? "; not a tar archive?" : ""));
      const char type = static_cast<char>(h[156]);
      std::string name = field_string(h, 100);
      const std::string magic(reinterpret_cast<const char*>(h + 257), 6);
      if (magic == std::string("ustar\0", 6)) {  // POSIX ustar: name may be split into prefix/name
        std::string prefix = field_string(h + 345, 155);
        if (!prefix.empty()) name = prefix + "/" + name;
      }
      if (!long_name.empty()) name = long_name;
      if (!pax_path.empty()) name = pax_path;
      uint64_t size = 0;
      if (!parse_number(h + 124, 12, &size))
        throw Error(ar_.path_, "tar header at offset " + std::to_string(at) + " for '" + printable(
                                   reinterpret_cast<const uint8_t*>(name.data()), name.size()) +
                                   "' has an invalid size field '" + printable(h + 124, 12) + "'");
      if (have_pax_size) size = pax_size;

      switch (type) {
        case 'L':
          long_name = read_meta(name, size, "GNU long name");
          long_name = long_name.substr(0, long_name.find('\0'));
          continue;  // applies to the next header
        case 'K':
          read_meta(name, size, "GNU long link");
          continue;
        case 'x': {
          parse_pax(read_meta(name, size, "pax header"), at, &pax_path, &have_pax_size, &pax_size);
          continue;
        }
        case 'g':
          read_meta(name, size, "pax global header");
          continue;
        case 'S':
          throw Error(ar_.path_, "tar member '" + name + "' is a GNU sparse file, which is not supported");
        default:
          break;
      }
      long_name.clear();
      pax_path.clear();
      have_pax_size = false;

      TarEntry e;
      e.name = TarArchive::normalise_name(name);
      e.type = type;
      if (type == '\0' || type == '7') e.type = '0';
      if (e.type == '0' && !name.empty() && name.back() == '/') e.type = '5';
      // Python's tarfile and GNU tar skip data only for regular files and unknown types; folders,
      // links and devices carry none, whatever their size field says.
      const bool has_data = e.type == '0' || std::string("123456").find(type) == std::string::npos;
      e.size = has_data ? size : 0;
      TarArchive::Item item;
      if (e.type == '0') {
        const bool keep = !ar_.compressed_ || !keep_ || keep_(e.name, e.size);
        const std::string origin = ar_.path_ + ":" + e.name;
        if (keep) {
          item.bytes = src_.take(e.size, origin);
          item.kept = true;
          if (item.bytes.nbytes < e.size) past_end(e.name, at + kBlock, e.size);
        } else if (src_.skip(e.size) < e.size) {
          past_end(e.name, at + kBlock, e.size);
        }
      } else if (has_data && src_.skip(e.size) < e.size) {
        past_end(e.name, at + kBlock, e.size);
      }
      skip_padding(e.size);
      if (e.name.empty()) continue;  // the archive's own root folder ("./")
      item.entry = e;
      ar_.entries_.push_back(e);
      ar_.items_.push_back(std::move(item));
    }
    src_.finish();
  }

 private:
  [[noreturn]] void past_end(const std::string& name, uint64_t offset, uint64_t size) {
    throw Error(ar_.path_, "tar member '" + name + "' runs past the end of the archive (needs " +
                               std::to_string(size) + " bytes at offset " + std::to_string(offset) + ", " +
                               src_.size_text() + ")");
  }

  void skip_padding(uint64_t size) {
    // A missing final padding is tolerated: the member's bytes are complete.
    src_.skip((kBlock - size % kBlock) % kBlock);
  }

  std::string read_meta(const std::string& name, uint64_t size, const char* what) {
    const uint64_t at = src_.position();
    if (size > kMaxMetaSize)
      throw Error(ar_.path_, std::string(what) + " at offset " + std::to_string(at) + " claims " +
                                 std::to_string(size) + " bytes (limit " + std::to_string(kMaxMetaSize) + ")");
    std::string s(static_cast<size_t>(size), '\0');
    if (src_.read(reinterpret_cast<uint8_t*>(&s[0]), s.size()) < s.size())
      past_end(name.empty() ? what : name, at, size);
    skip_padding(size);
    return s;
  }

  // Pax records are "<len> <key>=<value>\n", len counting the whole record.
  void parse_pax(const std::string& d, uint64_t at, std::string* path, bool* have_size, uint64_t* size) {
    size_t pos = 0;
    auto bad = [&](const std::string& why) {
      throw Error(ar_.path_, "bad pax header at offset " + std::to_string(at) + ": " + why);
    };
    while (pos < d.size()) {
      if (d[pos] == '\0') break;  // padding
      size_t sp = pos;
      uint64_t len = 0;
      while (sp < d.size() && d[sp] >= '0' && d[sp] <= '9') {
        len = len * 10 + (d[sp] - '0');
        if (len > d.size()) bad("record length exceeds the header");
        ++sp;
      }
      if (sp == pos || sp >= d.size() || d[sp] != ' ') bad("record without a length");
      if (len <= sp - pos + 1 || len > d.size() - pos) bad("record length " + std::to_string(len) + " out of range");
      const size_t end = pos + static_cast<size_t>(len);
      if (d[end - 1] != '\n') bad("record does not end in a newline");
      std::string rec = d.substr(sp + 1, end - 1 - (sp + 1));
      size_t eq = rec.find('=');
      if (eq == std::string::npos) bad("record without '='");
      const std::string key = rec.substr(0, eq), value = rec.substr(eq + 1);
      if (key == "path") {
        *path = value;
      } else if (key == "size") {
        uint64_t v = 0;
        if (value.empty()) bad("empty size");
        for (char c : value) {
          if (c < '0' || c > '9' || (v >> 59)) bad("invalid size '" + value + "'");
          v = v * 10 + (c - '0');
        }
        *have_size = true;
        *size = v;
      }
      pos = end;
    }
  }

  TarArchive& ar_;
  TarSource& src_;
  const TarArchive::MemberFilter& keep_;
};

bool TarArchive::is_gzip(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

bool TarArchive::looks_like_tar(const uint8_t* data, size_t size) {
  if (size < kBlock || all_zero(data, kBlock)) return false;
  uint64_t stored, computed;
  return checksum_ok(data, &stored, &computed);
}

std::shared_ptr<TarArchive> TarArchive::open(const std::string& path, const MemberFilter& keep) {
  return from_bytes(file_storage(MappedFile::open(path)), keep);
}

std::shared_ptr<TarArchive> TarArchive::from_bytes(const Storage& bytes, const MemberFilter& keep) {
  auto ar = std::shared_ptr<TarArchive>(new TarArchive());
  ar->path_ = bytes.origin;
  ar->compressed_ = is_gzip(bytes.data, bytes.nbytes);
  if (bytes.nbytes >= 3 && std::memcmp(bytes.data, "BZh", 3) == 0)
    throw Error(ar->path_, "bzip2-compressed archives are not supported (expected tar or tar.gz)");
  if (bytes.nbytes >= 6 && std::memcmp(bytes.data, "\xfd" "7zXZ\0", 6) == 0)
    throw Error(ar->path_, "xz-compressed archives are not supported (expected tar or tar.gz)");
  std::unique_ptr<TarSource> src;
  if (ar->compressed_) {
    src.reset(new GzipSource(bytes, ar->path_));
  } else {
    if (bytes.nbytes == 0) throw Error(ar->path_, "empty file, expected a tar archive");
    src.reset(new PlainSource(bytes));
  }
  TarIndexer(*ar, *src, keep).run();
  return ar;
}

std::string TarArchive::normalise_name(const std::string& raw) {
  std::string out;
  size_t i = 0;
  while (i < raw.size()) {
    size_t j = raw.find('/', i);
    if (j == std::string::npos) j = raw.size();
    std::string part = raw.substr(i, j - i);
    // Empty and "." components vanish ("./a//b/" -> "a/b"); ".." is kept, nothing is extracted.
    if (!part.empty() && part != ".") {
      if (!out.empty()) out += '/';
      out += part;
    }
    i = j + 1;
  }
  return out;
}

const TarArchive::Item* TarArchive::find_item(const std::string& name) const {
  const std::string n = normalise_name(name);
  for (size_t i = items_.size(); i-- > 0;)
    if (items_[i].entry.name == n) return &items_[i];
  return nullptr;
}

bool TarArchive::has(const std::string& name) const { return find_item(name) != nullptr; }

bool TarArchive::loaded(const std::string& name) const {
  const Item* it = find_item(name);
  return it && it->kept;
}

Storage TarArchive::member(const std::string& name) const {
  const Item* it = find_item(name);
  if (!it) throw Error(path_, "no member '" + name + "' in the archive");
  if (!it->entry.is_file())
    throw Error(path_, "archive member '" + it->entry.name + "' is not a regular file (type '" +
                           std::string(1, it->entry.type ? it->entry.type : '0') + "')");
  if (!it->kept)
    throw Error(path_, "archive member '" + it->entry.name + "' was skipped while reading the gzip stream");
  return it->bytes;
}

std::vector<std::string> TarArchive::find(const std::string& pattern) const {
  std::vector<std::string> out;
  for (const auto& e : entries_) {
    if (!e.is_file() || fnmatch(pattern.c_str(), e.name.c_str(), FNM_PATHNAME) != 0) continue;
    if (std::find(out.begin(), out.end(), e.name) == out.end()) out.push_back(e.name);
  }
  return out;
}

}  // namespace ftx
