#include "formats/fp8_e4m3.h"

#include <cmath>

namespace ftx {

E4M3Table::E4M3Table() {
  for (int q = 0; q < 256; ++q) {
    const int exp = (q >> 3) & 0xf, mant = q & 7;
    float v;
    if (exp == 0xf && mant == 7)
      v = NAN;
    else if (exp == 0)
      v = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant · 2^-9
    else
      v = std::ldexp(static_cast<float>(8 + mant), exp - 10);  // (1 + mant/8) · 2^(exp - 7)
    value[q] = (q & 0x80) ? -v : v;
  }
}

const E4M3Table kE4M3;

}  // namespace ftx
