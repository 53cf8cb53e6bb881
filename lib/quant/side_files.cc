#include "lib/quant/side_files.h"

#include "lib/ops/backend.h"

namespace ftx::quant {

std::vector<float> stored_values(const HostTensor& w, DType storage) {
  std::vector<float> stored(w.data);
  if (storage != DType::kFloat32) {
    std::vector<uint16_t> half(stored.size());
    ops::convert_weight(w.data.data(), DType::kFloat32, half.data(), storage, stored.size());
    ops::convert_weight(half.data(), storage, stored.data(), DType::kFloat32, stored.size());
  }
  return stored;
}

}  // namespace ftx::quant
