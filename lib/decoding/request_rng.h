#pragma once
// Per-request random stream. FT seeds one curand state per row from that row's seed at the start of
// generation; here each request owns a 64-bit Mersenne Twister seeded with its seed, so a request
// draws the same numbers whatever batch it is in and whatever row it occupies.
#include <cstdint>
#include <random>

namespace ftx::decoding {

class RequestRng {
 public:
  explicit RequestRng(uint64_t seed) : engine_(seed) {}
  // U(0,1], like curand_uniform: 53 random bits mapped to {1, ..., 2^53} / 2^53.
  double uniform() { return (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace ftx::decoding
