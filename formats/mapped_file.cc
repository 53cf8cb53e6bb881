#include "formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "formats/error.h"

namespace ftx {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(path, "is a directory, expected a file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw Error(path, std::string("cannot map: ") + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

std::shared_ptr<MappedFile> MappedFile::map_fd(int fd, size_t size, const std::string& label) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = label;
  f->size_ = size;
  if (size > 0) {
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) throw Error(label, std::string("cannot map: ") + std::strerror(errno));
    f->data_ = static_cast<const uint8_t*>(p);
  }
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

const uint8_t* MappedFile::slice(uint64_t offset, uint64_t length, const std::string& what) const {
  if (offset > size_ || length > size_ - offset)
    throw Error(path_, what + " runs past the end of the file (bytes " + std::to_string(offset) + "+" +
                           std::to_string(length) + ", file has " + std::to_string(size_) + ")");
  return data_ + offset;
}

static void page_range(uint64_t offset, uint64_t length, size_t size, uintptr_t base, uintptr_t* lo,
                       uintptr_t* hi) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uint64_t end = offset + length > size ? size : offset + length;
  *lo = (base + offset) & ~(page - 1);
  *hi = (base + end + page - 1) & ~(page - 1);
}

void MappedFile::release(uint64_t offset, uint64_t length) const {
  if (!data_ || offset >= size_) return;
  uintptr_t lo, hi;
  page_range(offset, length, size_, reinterpret_cast<uintptr_t>(data_), &lo, &hi);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void MappedFile::will_need(uint64_t offset, uint64_t length) const {
  if (!data_ || offset >= size_) return;
  uintptr_t lo, hi;
  page_range(offset, length, size_, reinterpret_cast<uintptr_t>(data_), &lo, &hi);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_WILLNEED);
}

}  // namespace ftx
