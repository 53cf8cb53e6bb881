#pragma once
// Output files that lose nothing. Every file flag of every subcommand goes through here:
//  * "-" is standard output;
//  * a path that is not a regular file (a pipe, FIFO, terminal, character device, /dev/stdout,
//    /dev/fd/N) is written to directly and never renamed over;
//  * a regular file appears only when complete (written under a hidden temporary sibling name and
//    renamed into place), and an existing one is replaced only with --force. A symlink to a regular
//    file stays a symlink: its target is what gets replaced.
// ResultJournal adds crash safety for long jobs: results are appended to OUT.partial as they are
// made, so a killed job can --resume where it stopped.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace ftx {

enum class OutputKind {
  kStdout,   // "-"
  kDirect,   // exists and is not a regular file, or is the file this process's stdout/stderr is
  kRegular,  // a regular file (existing or not): temporary sibling + rename
};

struct OutputTarget {
  OutputKind kind = OutputKind::kRegular;
  std::string path;      // as given
  std::string resolved;  // kRegular: the file to replace (symlinks followed); else = path
  bool exists = false;   // kRegular: the file exists now
};

// Decides how `path` is written. Errors: a folder, a dangling symlink, an empty path.
OutputTarget classify_output(const std::string& path);

// Name for messages: "<stdout>" for "-", else the path.
std::string output_display_name(const std::string& path);

// A text or binary output that appears only when complete (see above). Not thread-safe.
class AtomicOutput {
 public:
  // Throws Error when a regular `path` exists and !force (naming --force), or cannot be created.
  AtomicOutput(const std::string& path, bool force);
  ~AtomicOutput();  // an uncommitted temporary is removed
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  void write(const void* data, size_t n);  // Error naming the output on a failed write
  void write(const std::string& s) { write(s.data(), s.size()); }
  void flush();
  // Flushes and, for a regular file, renames the temporary into place (replacing the old file).
  void commit();
  const OutputTarget& target() const { return target_; }

 private:
  OutputTarget target_;
  std::string tmp_;
  std::FILE* file_ = nullptr;
  bool owns_file_ = false, committed_ = false;
  int pending_ = -1;  // formats/pending_outputs.h
};

// Writes a whole file at once through AtomicOutput.
void write_output_file(const std::string& path, const std::string& contents, bool force);

// ResultJournal: an ordered JSON-lines output written record by record.
//  * Regular OUT: records go to OUT.partial (flushed after each append), and each record's
//    fingerprint (a hash of the request that produced it) to OUT.partial.index, whose first line
//    describes the run (`run`, a JSON object). finish() renames OUT.partial to OUT and removes the
//    index. A run that dies leaves both; `resume` reopens them: complete records are kept (a record
//    without its fingerprint line, or a torn last line, is dropped), and the caller checks each
//    kept record's fingerprint against its own input before skipping it.
//  * "-" or a non-regular OUT: records are written straight to it; resume is a UsageError.
// Without resume, an existing OUT.partial is an error (it belongs to an interrupted run: --resume
// continues it, --force starts over) and so is an existing OUT without force. OUT.partial is locked
// (flock) while open, so two runs cannot write it at once.
class ResultJournal {
 public:
  struct Options {
    bool force = false;
    bool resume = false;
    std::string run;  // JSON object text: what must not change between a run and its resume
  };
  ResultJournal(const std::string& path, const Options& options);
  ~ResultJournal();
  ResultJournal(const ResultJournal&) = delete;
  ResultJournal& operator=(const ResultJournal&) = delete;

  // Records already in OUT.partial when resumed (0 otherwise).
  int64_t resumed() const { return static_cast<int64_t>(fingerprints_.size()); }
  uint64_t fingerprint(int64_t i) const { return fingerprints_.at(static_cast<size_t>(i)); }
  // Calls fn(i, line) for each kept record (no trailing newline), in order.
  void for_each_resumed(const std::function<void(int64_t, const std::string&)>& fn) const;

  // Appends one record (a line without its newline) and its fingerprint; flushes both.
  void append(const std::string& line, uint64_t fingerprint);
  int64_t records() const { return records_; }  // resumed + appended
  // Regular OUT: fsync, rename OUT.partial over OUT, remove the index. Direct: flush.
  void finish();
  bool direct() const { return target_.kind != OutputKind::kRegular; }
  const std::string& partial_path() const { return partial_; }

 private:
  void open(const std::string& path, const Options& options);
  void open_fresh();
  void reopen_for_resume(const std::string& run);

  OutputTarget target_;
  std::string partial_, index_;
  std::FILE* out_ = nullptr;
  std::FILE* idx_ = nullptr;
  int lock_fd_ = -1;
  bool force_ = false, finished_ = false;
  int64_t records_ = 0;
  std::vector<uint64_t> fingerprints_;
};

// 64-bit FNV-1a over bytes: request fingerprints (detects a changed input file, not an attack).
uint64_t fingerprint64(const void* data, size_t n, uint64_t seed = 0xcbf29ce484222325ull);
inline uint64_t fingerprint64(const std::string& s) { return fingerprint64(s.data(), s.size()); }

}  // namespace ftx
