#pragma once
// One exception type for every failure a user can cause: bad input files, bad flags, short files.
// `main` catches it once and prints `ftx: error: <what>` on one line.
#include <stdexcept>
#include <string>

namespace ftx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  // "<path>: <message>": the path is the file (or file:member) the problem was found in.
  Error(const std::string& path, const std::string& message)
      : std::runtime_error(path.empty() ? message : path + ": " + message), path_(path) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Usage errors (bad flag combinations) exit with code 2 instead of 1.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace ftx

#define FTX_CHECK(cond, path, msg)                      \
  do {                                                  \
    if (!(cond)) throw ::ftx::Error((path), (msg));     \
  } while (0)
