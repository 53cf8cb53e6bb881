#pragma once
// Progress lines for long jobs, on stderr, rewritten in place on a terminal and at most a few times
// per second; silent when quiet. Machine-readable results never go here.
#include <chrono>
#include <cstdint>
#include <string>

namespace ftx {

class Progress {
 public:
  // `unit` names the items; with total_bytes 0 no byte counts are printed.
  Progress(std::string label, uint64_t total_items, uint64_t total_bytes, bool quiet, std::string unit = "tensors");
  // Adds work done; prints at most every 200 ms.
  void advance(uint64_t items, uint64_t bytes);
  // Prints the final line (items, bytes, MB/s, seconds) unless quiet.
  void finish();
  double elapsed_seconds() const;

 private:
  void print(bool final_line);
  std::string label_, unit_;
  uint64_t total_items_, total_bytes_, items_ = 0, bytes_ = 0;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace ftx
