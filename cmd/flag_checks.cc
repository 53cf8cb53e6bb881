#include "cmd/flag_checks.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
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

void check_token_id_flag(const std::string& flag, int64_t v) {
  if (v < -1 || v > INT32_MAX)
    throw UsageError(flag + " " + std::to_string(v) + " is not a token id (0 to " + std::to_string(INT32_MAX) + ")");
}

void check_range(const std::string& flag, double v, double lo, double hi) {
  if (std::isfinite(v) && v >= lo && v <= hi) return;
  throw UsageError(flag + " " + shown(v) + " is outside [" + shown(lo) + ", " + shown(hi) + "]");
}

void check_raw_values(const CLI::App& sub, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.empty()) throw UsageError(sub.get_name() + ": an empty argument (a shell variable that is not set?)");
    if (a.size() < 2 || a[0] != '-') continue;
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const CLI::Option* opt = sub.get_option_no_throw(name);
    if (!opt || opt->get_type_size() <= 0 || opt->get_expected_max() <= 0) continue;  // a flag takes no value
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      continue;  // CLI11 says the value is missing
    }
    if (value.empty()) throw UsageError(name + ": empty value (a shell variable that is not set?)");
    const std::string type = opt->get_type_name();
    const char* p = value.c_str();
    char* end = nullptr;
    errno = 0;
    if (type.rfind("INT", 0) == 0) {
      std::strtoll(p, &end, 10);
      if (*end != '\0' || end == p) throw UsageError(name + " " + value + " is not an integer");
      if (errno == ERANGE) throw UsageError(name + " " + value + " is beyond any count ftx takes");
    } else if (type.rfind("UINT", 0) == 0) {
      std::strtoull(p, &end, 10);
      if (*end != '\0' || end == p || value.find('-') != std::string::npos)
        throw UsageError(name + " " + value + " is not a non-negative integer");
      if (errno == ERANGE) throw UsageError(name + " " + value + " is beyond 64 bits");
    } else if (type.rfind("FLOAT", 0) == 0) {
      std::strtod(p, &end);
      if (*end != '\0' || end == p) throw UsageError(name + " " + value + " is not a number");
    }
  }
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
