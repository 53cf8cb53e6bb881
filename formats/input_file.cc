#include "formats/input_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "formats/error.h"

namespace ftx {

LineReader::LineReader(const std::string& path) : name_(input_display_name(path)) {
  if (path == "-") {
    file_ = stdin;
    return;
  }
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  owned_ = true;
}

LineReader::~LineReader() {
  if (owned_) std::fclose(file_);
  std::free(buf_);
}

bool LineReader::read_raw(std::string& line) {
  errno = 0;
  const ssize_t n = ::getline(&buf_, &cap_, file_);
  if (n < 0) {
    if (std::ferror(file_)) throw Error(name_, std::string("read failed: ") + std::strerror(errno));
    return false;
  }
  size_t len = static_cast<size_t>(n);
  if (len && buf_[len - 1] == '\n') --len;
  if (len && buf_[len - 1] == '\r') --len;
  size_t start = 0;
  if (!read_any_ && len >= 3 && std::memcmp(buf_, "\xEF\xBB\xBF", 3) == 0) start = 3;  // a UTF-8 byte-order mark
  read_any_ = true;
  line.assign(buf_ + start, len - start);
  return true;
}

bool LineReader::next(std::string& line) {
  if (have_peeked_) {
    have_peeked_ = false;
    if (!peeked_ok_) return false;
    line.swap(peeked_);
  } else if (!read_raw(line)) {
    return false;
  }
  ++line_no_;
  return true;
}

bool LineReader::peek(std::string& line) {
  if (!have_peeked_) {
    peeked_ok_ = read_raw(peeked_);
    have_peeked_ = true;
  }
  if (peeked_ok_) line = peeked_;
  return peeked_ok_;
}

std::string spool_input(const std::string& path, const std::string& what) {
  if (path != "-") return path;
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = tmpdir && *tmpdir ? tmpdir : "/tmp";
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    // Filesystems without O_TMPFILE: a named file, unlinked at once.
    std::string tmpl = dir + "/ftx-stdin-XXXXXX";
    fd = ::mkostemp(&tmpl[0], O_CLOEXEC);
    if (fd < 0) throw Error(dir, "cannot create a temporary file for " + what + " on standard input: " + std::strerror(errno));
    ::unlink(tmpl.c_str());
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("<stdin>", std::string("read failed: ") + std::strerror(errno));
    }
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = ::write(fd, buf + off, static_cast<size_t>(n - off));
      if (w < 0) {
        if (errno == EINTR) continue;
        throw Error(dir, "cannot spool " + what + " from standard input: " + std::strerror(errno));
      }
      off += w;
    }
  }
  return "/proc/self/fd/" + std::to_string(fd);  // the descriptor stays open: the file lives on
}

}  // namespace ftx
