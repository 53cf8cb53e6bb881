#include "lib/quant/side_files.h"

#include "lib/ops/backend.h"
#include "lib/ops/host_math.h"

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

GemmSplit gemm_split(const HostModel& model, const std::string& base) {
  const std::string name = base + ".weight";
  const HostTensor& w = model.at(name);
  GemmSplit s;
  s.rows = w.shape.front();
  s.cols = w.numel() / s.rows;
  s.by_rows = ft_split_of(name) == OutSplit::kRow;
  if (!s.by_rows) s.segs = column_segments_of(model.cfg, name, s.cols);
  return s;
}

}  // namespace ftx::quant
