#include "lib/util/progress.h"

#include <unistd.h>

#include <cstdio>

namespace ftx {

Progress::Progress(std::string label, uint64_t total_items, uint64_t total_bytes, bool quiet, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_items_(total_items), total_bytes_(total_bytes), quiet_(quiet),
      tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()), last_(start_) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::advance(uint64_t items, uint64_t bytes) {
  items_ += items;
  bytes_ += bytes;
  if (quiet_) return;
  auto now = std::chrono::steady_clock::now();
  // Off a terminal, each line is kept in the log, so print less often there.
  auto every = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(2000);
  if (now - last_ < every) return;
  last_ = now;
  print(false);
}

void Progress::print(bool final_line) {
  double s = elapsed_seconds();
  double mb = static_cast<double>(bytes_) / 1e6;
  if (total_bytes_ == 0) {
    std::fprintf(stderr, "%s%s: %llu/%llu %s, %.1f s%s", tty_ ? "\r" : "", label_.c_str(),
                 static_cast<unsigned long long>(items_), static_cast<unsigned long long>(total_items_),
                 unit_.c_str(), s, (final_line || !tty_) ? "\n" : "");
    std::fflush(stderr);
    return;
  }
  std::fprintf(stderr, "%s%s: %llu/%llu %s, %.1f/%.1f MB, %.1f MB/s, %.1f s%s", tty_ ? "\r" : "",
               label_.c_str(), static_cast<unsigned long long>(items_),
               static_cast<unsigned long long>(total_items_), unit_.c_str(), mb, static_cast<double>(total_bytes_) / 1e6,
               s > 0 ? mb / s : 0.0, s, (final_line || !tty_) ? "\n" : "");
  std::fflush(stderr);
}

void Progress::finish() {
  if (!quiet_) print(true);
}

}  // namespace ftx
