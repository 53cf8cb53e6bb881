#pragma once
// Input files where "-" means standard input. LineReader streams text line by line (prompt files,
// JSON lines of any size); spool_input() gives parsers that map their input (checkpoints, .nemo
// archives) a file even when the bytes arrive on a pipe.
#include <cstdint>
#include <cstdio>
#include <string>

namespace ftx {

class LineReader {
 public:
  // "-" reads standard input. Error(path, "cannot open: ...") when the file cannot be opened.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its "\n" (and a trailing "\r"); false at the end of the input. A UTF-8
  // byte-order mark at the start of the input (Windows editors write one) is not part of the line.
  bool next(std::string& line);
  // The next line, without consuming it.
  bool peek(std::string& line);
  int64_t line_number() const { return line_no_; }  // 1-based number of the line last returned
  const std::string& name() const { return name_; }  // the path, or "<stdin>"

 private:
  bool read_raw(std::string& line);
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::string name_;
  int64_t line_no_ = 0;
  bool have_peeked_ = false, peeked_ok_ = false, read_any_ = false;
  std::string peeked_;
  char* buf_ = nullptr;
  size_t cap_ = 0;
};

// The path itself, or for "-" the path of a private copy of standard input: an unlinked file under
// $TMPDIR (default /tmp), named /proc/self/fd/N, that lives until the process exits. `what` names
// the input in errors ("checkpoint").
std::string spool_input(const std::string& path, const std::string& what);

// Name for messages: "<stdin>" for "-", else the path.
inline std::string input_display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

}  // namespace ftx
