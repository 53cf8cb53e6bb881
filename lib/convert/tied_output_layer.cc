#include "lib/convert/tied_output_layer.h"

#include <cstring>
#include <vector>

#include "formats/error.h"

namespace ftx {

bool same_tensor_values(const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype || a.shape != b.shape) return false;
  std::vector<uint8_t> x, y;
  a.copy_contiguous(x);
  b.copy_contiguous(y);
  return x == y;
}

bool same_tensor_values(const ChunkViews& a, const ChunkViews& b, const std::vector<int64_t>& shape,
                        const std::string& what) {
  auto bytes = [&](const ChunkViews& c) {
    std::vector<uint8_t> all, part;
    for (const TensorView& s : shards_along(c, shape, 0, what)) {
      s.copy_contiguous(part);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  if (a.empty() || b.empty() || a.front().view.dtype != b.front().view.dtype) return false;
  return bytes(a) == bytes(b);
}

void refuse_untied_output_layer(const McoreArgs& a, const std::string& origin) {
  throw Error(origin, "holds an output_layer.weight that differs from embedding.word_embeddings.weight, but " +
                          a.tied_because +
                          " (tied: the output layer is the word embeddings); megatron-core would not load it into that "
                          "model. If the model was trained with its own output layer, " +
                          a.untie_hint + " and convert again");
}

}  // namespace ftx
