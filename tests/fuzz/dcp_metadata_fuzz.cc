// libFuzzer target: arbitrary bytes as a distributed checkpoint's `.metadata`, beside one small
// real chunk file, through DcpCheckpoint: the allow-listed unpickling, the record checks, and for
// every tensor it names the chunk checks (inside the file, tiling the tensor, a torch.save archive
// of the right shape and dtype).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "formats/dcp_checkpoint.h"
#include "formats/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A chunk file of 4 KiB of zeros: chunks that name it fail inside the archive reader.
  static const uint8_t distcp[4096] = {0};
  try {
    ftx::DcpCheckpoint ck("fuzz", [&](const std::string& name) {
      ftx::Storage s;
      s.origin = "fuzz/" + name;
      if (name == ".metadata") {
        s.data = data;
        s.nbytes = size;
      } else if (name == "__0_0.distcp") {
        s.data = distcp;
        s.nbytes = sizeof distcp;
      } else {
        throw ftx::Error(s.origin, "cannot open");
      }
      return s;
    });
    for (const auto& kv : ck.tensors()) {
      try {
        for (const auto& c : ck.chunks(kv.first)) ftx::compute_stats(c.view);
      } catch (const ftx::Error&) {
      }
    }
  } catch (const ftx::Error&) {
  }
  return 0;
}
