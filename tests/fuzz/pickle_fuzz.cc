// libFuzzer target: arbitrary bytes through the safe unpickler. Persistent ids resolve to a small
// dummy storage so that tensor rebuilds are exercised; the result is walked like a listing would.
#include <cstddef>
#include <cstdint>

#include "formats/error.h"
#include "formats/pickle.h"
#include "formats/value.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const uint8_t storage[64] = {0};
  ftx::PersistentLoader loader = [](const ftx::ValuePtr&) {
    ftx::TensorView t;
    t.dtype = ftx::DType::kFloat32;
    t.shape = {16};
    t.storage.data = storage;
    t.storage.nbytes = sizeof storage;
    t.storage.origin = "dummy";
    return ftx::Value::of_tensor(t);
  };
  try {
    size_t used = 0;
    ftx::ValuePtr v = ftx::unpickle(data, size, "fuzz.pkl", loader, &used);
    if (used > size) __builtin_trap();
    std::vector<ftx::NamedTensor> tensors;
    std::vector<ftx::NamedValue> others;
    ftx::flatten_value(v, "", tensors, others);
    for (const auto& o : others) o.value->repr(200);
    for (const auto& t : tensors) {
      try {
        t.tensor.validate(t.name);
        ftx::compute_stats(t.tensor);
      } catch (const ftx::Error&) {
      }
    }
  } catch (const ftx::Error&) {
  }
  return 0;
}
