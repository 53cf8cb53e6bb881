// libFuzzer target: the safetensors reader over arbitrary bytes; every tensor it returns is read.
#include <cstddef>
#include <cstdint>

#include "formats/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ftx::Storage s;
  s.data = data;
  s.nbytes = size;
  s.origin = "fuzz.safetensors";
  try {
    ftx::SafetensorsMetadata meta;
    for (const auto& t : ftx::read_safetensors(s, &meta)) ftx::compute_stats(t.tensor);
  } catch (const ftx::Error&) {
  }
  return 0;
}
