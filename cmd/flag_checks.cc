#include "cmd/flag_checks.h"

#include <sys/stat.h>

#include <cmath>
#include <sstream>

#include "formats/error.h"

namespace ftx::cmd {

namespace {

std::string shown(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

void check_range(const std::string& flag, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return;
  std::string why;
  if (v < lo && lo == 0) why = "is negative";
  else if (v < lo) why = "must be at least " + std::to_string(lo);
  else why = "must be at most " + std::to_string(hi);
  throw UsageError(flag + " " + std::to_string(v) + " " + why);
}

void check_range(const std::string& flag, double v, double lo, double hi) {
  if (std::isfinite(v) && v >= lo && v <= hi) return;
  throw UsageError(flag + " " + shown(v) + " is outside [" + shown(lo) + ", " + shown(hi) + "]");
}

void check_distinct_files(const std::string& in_flag, const std::string& in, const std::string& out_flag,
                          const std::string& out) {
  if (in.empty() || out.empty() || in == "-" || out == "-") return;
  struct stat a, b;
  const bool same = in == out || (::stat(in.c_str(), &a) == 0 && ::stat(out.c_str(), &b) == 0 &&
                                  a.st_dev == b.st_dev && a.st_ino == b.st_ino && S_ISREG(a.st_mode));
  if (same)
    throw UsageError(out_flag + " " + out + " is the same file as " + in_flag + " " + in +
                     ": the results would replace their own input; choose another " + out_flag);
}

}  // namespace ftx::cmd
