// libFuzzer target: arbitrary bytes as a torch checkpoint (zip or legacy). Whatever loads is
// listed and every tensor's bytes are read, so a view that escapes its storage is caught by ASan.
#include <cstddef>
#include <cstdint>

#include "formats/error.h"
#include "formats/torch_checkpoint.h"
#include "formats/value.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ftx::Storage bytes;
  bytes.data = data;
  bytes.nbytes = size;
  bytes.origin = "fuzz.pt";
  try {
    ftx::ValuePtr v = ftx::load_torch_checkpoint(bytes);
    std::vector<ftx::NamedTensor> tensors;
    std::vector<ftx::NamedValue> others;
    ftx::flatten_value(v, "", tensors, others);
    for (const auto& o : others) o.value->repr(200);
    for (const auto& t : tensors) ftx::compute_stats(t.tensor);
  } catch (const ftx::Error&) {
  }
  return 0;
}
