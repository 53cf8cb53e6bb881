// libFuzzer target: the .npy reader over arbitrary bytes; an accepted array is read in full.
#include <cstddef>
#include <cstdint>

#include "formats/error.h"
#include "formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ftx::Storage s;
  s.data = data;
  s.nbytes = size;
  s.origin = "fuzz.npy";
  try {
    ftx::TensorView t = ftx::read_npy(s);
    ftx::compute_stats(t);
    std::vector<uint8_t> c;
    t.copy_contiguous(c);
  } catch (const ftx::Error&) {
  }
  return 0;
}
