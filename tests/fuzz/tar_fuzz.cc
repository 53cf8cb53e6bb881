// libFuzzer target: TarArchive over arbitrary bytes (plain tar and, via the 1f 8b magic, gzip).
#include <cstddef>
#include <cstdint>

#include "formats/error.h"
#include "formats/tar_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ftx::Storage s;
  s.data = data;
  s.nbytes = size;
  s.origin = "fuzz.nemo";
  try {
    // Keep every other member so that both the keep and the skip paths run on gzip input.
    size_t n = 0;
    auto ar = ftx::TarArchive::from_bytes(s, [&](const std::string&, uint64_t) { return (n++ & 1) == 0; });
    for (const auto& e : ar->entries()) {
      if (!ar->loaded(e.name)) continue;
      ftx::Storage m = ar->member(e.name);
      volatile uint8_t sink = 0;
      for (uint64_t i = 0; i < m.nbytes; i += 4096) sink = sink ^ m.data[i];
      if (m.nbytes) sink = sink ^ m.data[m.nbytes - 1];
    }
    ar->find("*.yaml");
  } catch (const ftx::Error&) {
  }
  return 0;
}
