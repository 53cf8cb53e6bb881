#pragma once
// Locates the format fixtures ($FTX_FIXTURES/formats, written by
// scripts/fixtures/make_format_fixtures.py). Under ctest the `formats_fixtures` FIXTURES_SETUP test
// (tests/e2e/fixtures.cmake) has made them already; when a test binary is run by hand, the first
// test suite to need them runs the script itself, under a file lock so that parallel test
// processes do not race. Returns "" (and the caller skips) when FTX_FIXTURES is not set.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ftx_test {

inline bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

inline std::string format_fixtures_dir() {
  const char* root = std::getenv("FTX_FIXTURES");
  const char* src = std::getenv("FTX_SOURCE_DIR");
  if (!root || !*root) return "";
  const std::string dir = std::string(root) + "/formats";
  if (file_exists(dir + "/.done")) return dir;
  if (!src || !*src) return "";
  ::mkdir(root, 0755);
  const std::string lock_path = std::string(root) + "/.formats.lock";
  int fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd >= 0) ::flock(fd, LOCK_EX);
  if (!file_exists(dir + "/.done")) {
    const char* py = std::getenv("FTX_TORCH_PYTHON");
    const std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " '" + src +
                            "/scripts/fixtures/make_format_fixtures.py' '" + dir + "'";
    // A failing script leaves no .done; the tests then skip with the reason below.
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "fixture script failed: %s\n", cmd.c_str());
  }
  if (fd >= 0) ::close(fd);
  return file_exists(dir + "/.done") ? dir : "";
}

inline std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_all(path)); }

}  // namespace ftx_test

// Skips the current test when the fixtures are unavailable, binding `dir` to their folder.
#define FTX_REQUIRE_FORMAT_FIXTURES(dir)                                                        \
  const std::string dir = ::ftx_test::format_fixtures_dir();                                   \
  if (dir.empty()) GTEST_SKIP() << "format fixtures unavailable: set FTX_FIXTURES and FTX_SOURCE_DIR " \
                                   "(ctest does) so make_format_fixtures.py can run"
