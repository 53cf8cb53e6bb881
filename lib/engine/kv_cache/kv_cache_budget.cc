#include "lib/engine/kv_cache/kv_cache_budget.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "formats/error.h"

namespace ftx::kv {

int64_t KvCacheBudget::blocks(int64_t block_bytes, size_t available) const {
  if (!fixed() || block_bytes <= 0) return 0;
  const double bytes = kind == Kind::kBytes ? value : value * static_cast<double>(available);
  return static_cast<int64_t>(std::floor(bytes / static_cast<double>(block_bytes)));
}

std::string KvCacheBudget::describe() const {
  char buf[64];
  switch (kind) {
    case Kind::kAuto: return "auto";
    case Kind::kBytes:
      if (value < 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.0f bytes", value);
      else if (value < 1024.0 * 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.1f MiB", value / (1024.0 * 1024.0));
      else std::snprintf(buf, sizeof buf, "%.2f GiB", value / (1024.0 * 1024.0 * 1024.0));
      break;
    case Kind::kFraction: std::snprintf(buf, sizeof buf, "%g of the available memory", value); break;
  }
  return buf;
}

KvCacheBudget KvCacheBudget::parse(const std::string& text, const std::string& flag) {
  KvCacheBudget b;
  if (text == "auto") return b;
  const auto bad = [&](const std::string& why) {
    return UsageError(flag + " " + text + ": " + why + " (auto, bytes such as 2G or 512M, or a fraction in (0, 1])");
  };
  const char* s = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || !std::isfinite(v) || v <= 0.0) throw bad("not a positive number");
  const std::string suffix(end);
  double unit = 0.0;
  if (suffix.empty()) unit = 1.0;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") unit = 1024.0;
  else if (suffix == "M" || suffix == "MiB") unit = 1024.0 * 1024.0;
  else if (suffix == "G" || suffix == "GiB") unit = 1024.0 * 1024.0 * 1024.0;
  else if (suffix == "T" || suffix == "TiB") unit = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else throw bad("unknown unit \"" + suffix + "\"");
  if (suffix.empty() && v <= 1.0) {
    b.kind = Kind::kFraction;
    b.value = v;
    return b;
  }
  // A plain number above 1 is a byte count: a fraction of a byte is a mistake (1.5 meant 1.5G?).
  if (suffix.empty() && v != std::floor(v))
    throw bad("neither a fraction in (0, 1] nor a whole number of bytes (a unit, as in " + text + "G, makes it a size)");
  b.kind = Kind::kBytes;
  b.value = std::floor(v * unit);
  return b;
}

}  // namespace ftx::kv
