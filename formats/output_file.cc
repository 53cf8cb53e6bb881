#include "formats/output_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/pending_outputs.h"

namespace ftx {

namespace {

std::string errno_text() { return std::strerror(errno); }

bool same_file(const struct stat& st, int fd) {
  struct stat o;
  return ::fstat(fd, &o) == 0 && o.st_dev == st.st_dev && o.st_ino == st.st_ino;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool exists_nofollow(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Opens an existing non-regular output (FIFO, terminal, character device, /dev/fd/N) for writing
// without creating or truncating anything; stdout/stderr themselves are used as they are.
std::FILE* open_direct(const std::string& path, bool* owned) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (same_file(st, STDOUT_FILENO)) {
      *owned = false;
      return stdout;
    }
    if (same_file(st, STDERR_FILENO)) {
      *owned = false;
      return stderr;
    }
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw Error(path, "cannot open for writing: " + errno_text());
  std::FILE* f = ::fdopen(fd, "a");
  if (!f) {
    ::close(fd);
    throw Error(path, "cannot open for writing: " + errno_text());
  }
  *owned = true;
  return f;
}

void check_write(std::FILE* f, const std::string& name) {
  if (std::ferror(f)) throw Error(name, "write failed: " + errno_text());
}

void flush_or_throw(std::FILE* f, const std::string& name) {
  if (std::fflush(f) != 0) throw Error(name, "write failed: " + errno_text() + write_error_hint(errno));
}

// Byte offsets just past each complete ('\n'-terminated) line of a file.
std::vector<int64_t> line_ends(const std::string& path) {
  std::vector<int64_t> ends;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(path, "cannot open: " + errno_text());
  char buf[1 << 16];
  int64_t off = 0;
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t i = 0; i < n; ++i)
      if (buf[i] == '\n') ends.push_back(off + static_cast<int64_t>(i) + 1);
    off += static_cast<int64_t>(n);
  }
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw Error(path, "read failed");
  return ends;
}

std::string read_prefix(const std::string& path, int64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string s(static_cast<size_t>(bytes), '\0');
  in.read(&s[0], bytes);
  if (in.gcount() != bytes) throw Error(path, "read failed");
  return s;
}

}  // namespace

OutputTarget classify_output(const std::string& path) {
  OutputTarget t;
  t.path = path;
  t.resolved = path;
  if (path.empty()) throw UsageError("an output path is empty");
  if (path == "-") {
    t.kind = OutputKind::kStdout;
    return t;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error(path, "is a folder; expected a file");
    if (!S_ISREG(st.st_mode)) {
      t.kind = OutputKind::kDirect;
      return t;
    }
    // A regular file that is this process's stdout/stderr (`--output /dev/stdout > file`) or is
    // reached through /dev or /proc: write through it, never rename over it.
    if (same_file(st, STDOUT_FILENO) || same_file(st, STDERR_FILENO) || starts_with(path, "/dev/") ||
        starts_with(path, "/proc/")) {
      t.kind = OutputKind::kDirect;
      return t;
    }
    char buf[PATH_MAX];
    if (::realpath(path.c_str(), buf) == nullptr) throw Error(path, "cannot resolve: " + errno_text());
    t.resolved = buf;
    t.exists = true;
    return t;
  }
  if (errno != ENOENT) throw Error(path, "cannot check: " + errno_text());
  if (exists_nofollow(path)) throw Error(path, "is a symlink to a missing file");
  return t;
}

std::string output_display_name(const std::string& path) { return path == "-" ? "<stdout>" : path; }

AtomicOutput::AtomicOutput(const std::string& path, bool force) : target_(classify_output(path)) {
  switch (target_.kind) {
    case OutputKind::kStdout:
      file_ = stdout;
      return;
    case OutputKind::kDirect:
      file_ = open_direct(path, &owns_file_);
      return;
    case OutputKind::kRegular:
      break;
  }
  if (target_.exists && !force) throw Error(path, "exists; use --force to overwrite");
  sweep_stale_temporaries(dir_of(target_.resolved), base_of(target_.resolved));
  tmp_ = dir_of(target_.resolved) + "/." + base_of(target_.resolved) + ".tmp-" + std::to_string(::getpid());
  // Registered before the file exists, so a signal the moment it appears finds it.
  pending_ = register_pending_output(tmp_, target_.path);
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) {
    const std::string why = errno_text();
    unregister_pending_output(pending_);  // no destructor for a constructor that throws
    throw Error(path, "cannot create output: " + why);
  }
  owns_file_ = true;
}

AtomicOutput::~AtomicOutput() {
  unregister_pending_output(pending_);
  if (owns_file_ && file_) std::fclose(file_);
  if (!tmp_.empty() && !committed_) std::remove(tmp_.c_str());
}

void AtomicOutput::write(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, file_) != n)
    throw Error(output_display_name(target_.path), "write failed: " + errno_text() + write_error_hint(errno));
}

void AtomicOutput::flush() { flush_or_throw(file_, output_display_name(target_.path)); }

void AtomicOutput::commit() {
  if (committed_) return;
  flush();
  if (target_.kind == OutputKind::kRegular) {
    if (::fsync(::fileno(file_)) != 0) throw Error(target_.path, "write failed: " + errno_text());
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) throw Error(target_.path, "write failed: " + errno_text());
    if (std::rename(tmp_.c_str(), target_.resolved.c_str()) != 0)
      throw Error(target_.path, "cannot move the finished output into place: " + errno_text());
  }
  committed_ = true;
  unregister_pending_output(pending_);
  pending_ = -1;
}

void write_output_file(const std::string& path, const std::string& contents, bool force) {
  AtomicOutput out(path, force);
  out.write(contents);
  out.commit();
}

uint64_t fingerprint64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// ---- ResultJournal ----

ResultJournal::ResultJournal(const std::string& path, const Options& o)
    : target_(classify_output(path)), force_(o.force) {
  try {
    open(path, o);
  } catch (...) {
    // The destructor does not run for a constructor that throws: release the files and the lock.
    if (out_ && lock_fd_ != -2) std::fclose(out_);
    else if (lock_fd_ >= 0) ::close(lock_fd_);
    if (idx_) std::fclose(idx_);
    out_ = idx_ = nullptr;
    throw;
  }
}

void ResultJournal::open(const std::string& path, const Options& o) {
  if (target_.kind != OutputKind::kRegular) {
    if (o.resume)
      throw UsageError("--resume needs a regular output file; " + output_display_name(path) +
                       " is standard output, a pipe or a device");
    bool owned = false;
    out_ = target_.kind == OutputKind::kStdout ? stdout : open_direct(path, &owned);
    if (!owned) lock_fd_ = -2;  // marks out_ as borrowed
    return;
  }
  partial_ = target_.resolved + ".partial";
  index_ = partial_ + ".index";
  const bool have_partial = exists_nofollow(partial_);
  if (o.resume && have_partial) {
    reopen_for_resume(o.run);
    return;
  }
  if (o.resume && target_.exists)
    throw Error(path, "is complete already: there is no " + base_of(partial_) + " to resume (--force runs again)");
  if (have_partial && !o.force)
    throw Error(partial_, "exists: the results of an interrupted run; --resume continues it, --force starts over");
  if (target_.exists && !o.force) throw Error(path, "exists; use --force to overwrite (or --resume)");
  open_fresh();
  std::fprintf(idx_, "%s\n", nlohmann::json{{"ftx", "result-journal"}, {"version", 1},
                                             {"run", nlohmann::json::parse(o.run.empty() ? "{}" : o.run)}}
                                   .dump()
                                   .c_str());
  flush_or_throw(idx_, index_);
}

void ResultJournal::open_fresh() {
  const int fd = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(partial_, "cannot create output: " + errno_text());
  // Lock before truncating: a running job's results must not be wiped by a second one.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw Error(partial_, "another process is writing it (locked)");
  }
  if (::ftruncate(fd, 0) != 0) {
    ::close(fd);
    throw Error(partial_, "cannot truncate: " + errno_text());
  }
  out_ = ::fdopen(fd, "w");
  lock_fd_ = fd;
  idx_ = std::fopen(index_.c_str(), "w");
  if (!out_ || !idx_) throw Error(index_, "cannot create: " + errno_text());
}

void ResultJournal::reopen_for_resume(const std::string& run) {
  const int fd = ::open(partial_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Error(partial_, "cannot open: " + errno_text());
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw Error(partial_, "another process is writing it (locked)");
  }
  lock_fd_ = fd;
  if (!exists_nofollow(index_)) throw Error(index_, "missing: cannot check what " + base_of(partial_) + " holds; --force starts over");
  const std::vector<int64_t> idx_ends = line_ends(index_);
  if (idx_ends.empty()) throw Error(index_, "has no header line; --force starts over");
  const std::string idx_text = read_prefix(index_, idx_ends.back());
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(idx_text.substr(0, static_cast<size_t>(idx_ends[0] - 1)));
  } catch (const std::exception& e) {
    throw Error(index_, std::string("line 1: not a result-journal header: ") + e.what());
  }
  if (!header.is_object() || header.value("ftx", "") != "result-journal" || !header.contains("run"))
    throw Error(index_, "line 1: not a result-journal header");
  const nlohmann::json now = nlohmann::json::parse(run.empty() ? "{}" : run);
  const nlohmann::json& was = header["run"];
  for (const auto* side : {&now, &was})
    for (auto it = side->begin(); it != side->end(); ++it) {
      const std::string& k = it.key();
      const nlohmann::json a = was.contains(k) ? was[k] : nlohmann::json(), b = now.contains(k) ? now[k] : nlohmann::json();
      if (a != b)
        throw Error(partial_, "was written by a different run (" + k + ": " + a.dump() + " then, " + b.dump() +
                                  " now); --resume needs the same model and options, --force starts over");
    }
  // Fingerprints: one 16-digit hex line per record.
  for (size_t i = 1; i < idx_ends.size(); ++i) {
    const size_t a = static_cast<size_t>(idx_ends[i - 1]), len = static_cast<size_t>(idx_ends[i] - idx_ends[i - 1] - 1);
    const std::string hex = idx_text.substr(a, len);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(hex.c_str(), &end, 16);
    if (hex.size() != 16 || *end != '\0') throw Error(index_, "line " + std::to_string(i + 1) + ": not a fingerprint");
    fingerprints_.push_back(v);
  }
  // Keep the records that have both their line and their fingerprint; drop a torn tail.
  const std::vector<int64_t> rec_ends = line_ends(partial_);
  const size_t keep = std::min(rec_ends.size(), fingerprints_.size());
  fingerprints_.resize(keep);
  const int64_t rec_bytes = keep ? rec_ends[keep - 1] : 0;
  if (::ftruncate(fd, rec_bytes) != 0) throw Error(partial_, "cannot truncate: " + errno_text());
  if (::truncate(index_.c_str(), idx_ends[keep]) != 0) throw Error(index_, "cannot truncate: " + errno_text());
  if (::lseek(fd, 0, SEEK_END) < 0) throw Error(partial_, "cannot seek: " + errno_text());
  out_ = ::fdopen(fd, "a");
  idx_ = std::fopen(index_.c_str(), "a");
  if (!out_ || !idx_) throw Error(partial_, "cannot reopen: " + errno_text());
  records_ = static_cast<int64_t>(keep);
}

ResultJournal::~ResultJournal() {
  const bool borrowed = lock_fd_ == -2;
  if (out_ && !borrowed) std::fclose(out_);  // closes lock_fd_ too, releasing the lock
  else if (out_) std::fflush(out_);
  if (idx_) std::fclose(idx_);
  // A run that failed before writing any record leaves nothing to resume behind.
  if (!finished_ && !partial_.empty() && records_ == 0) {
    std::remove(partial_.c_str());
    std::remove(index_.c_str());
  }
}

void ResultJournal::for_each_resumed(const std::function<void(int64_t, const std::string&)>& fn) const {
  if (fingerprints_.empty()) return;
  std::ifstream in(partial_, std::ios::binary);
  std::string line;
  for (int64_t i = 0; i < resumed() && std::getline(in, line); ++i) fn(i, line);
}

void ResultJournal::append(const std::string& line, uint64_t fingerprint) {
  const std::string name = direct() ? output_display_name(target_.path) : partial_;
  if (std::fwrite(line.data(), 1, line.size(), out_) != line.size() || std::fputc('\n', out_) == EOF)
    throw Error(name, "write failed: " + errno_text());
  flush_or_throw(out_, name);
  ++records_;
  if (direct()) return;
  // The fingerprint follows its record, so a record is never vouched for before it is written.
  std::fprintf(idx_, "%016llx\n", static_cast<unsigned long long>(fingerprint));
  check_write(idx_, index_);
  flush_or_throw(idx_, index_);
}

void ResultJournal::finish() {
  if (finished_) return;
  if (direct()) {
    flush_or_throw(out_, output_display_name(target_.path));
    finished_ = true;
    return;
  }
  flush_or_throw(out_, partial_);
  if (::fsync(::fileno(out_)) != 0) throw Error(partial_, "write failed: " + errno_text());
  if (std::rename(partial_.c_str(), target_.resolved.c_str()) != 0)
    throw Error(target_.path, "cannot move the finished output into place: " + errno_text());
  std::remove(index_.c_str());
  finished_ = true;
}

}  // namespace ftx
