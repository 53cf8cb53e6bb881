#include "lib/convert/dcp_shards.h"

#include <algorithm>

#include "formats/error.h"

namespace ftx {

namespace {

// The view moved by `count` elements along `axis` (strides as stored, C order when none).
void advance(TensorView& v, size_t axis, int64_t count) {
  std::vector<int64_t> tmp;
  v.offset += count * v.effective_strides(tmp)[axis];
}

}  // namespace

ChunkViews select_index(const ChunkViews& chunks, int64_t index) {
  ChunkViews out;
  for (const auto& c : chunks) {
    const int64_t begin = c.offsets.at(0), size = c.view.shape.at(0);
    if (index < begin || index >= begin + size) continue;
    DcpChunkView s = c;
    std::vector<int64_t> tmp;
    s.view.strides = c.view.effective_strides(tmp);
    advance(s.view, 0, index - begin);
    s.view.shape.erase(s.view.shape.begin());
    s.view.strides.erase(s.view.strides.begin());
    s.offsets.erase(s.offsets.begin());
    out.push_back(std::move(s));
  }
  return out;
}

ChunkViews narrow_range(const ChunkViews& chunks, size_t axis, int64_t begin, int64_t end) {
  ChunkViews out;
  for (const auto& c : chunks) {
    const int64_t lo = std::max(begin, c.offsets.at(axis));
    const int64_t hi = std::min(end, c.offsets[axis] + c.view.shape.at(axis));
    if (lo >= hi) continue;
    DcpChunkView s = c;
    std::vector<int64_t> tmp;
    s.view.strides = c.view.effective_strides(tmp);
    advance(s.view, axis, lo - c.offsets[axis]);
    s.view.shape[axis] = hi - lo;
    s.offsets[axis] = lo - begin;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<TensorView> shards_along(const ChunkViews& chunks, const std::vector<int64_t>& shape, int split_axis,
                                     const std::string& what) {
  FTX_CHECK(!chunks.empty(), what, "no chunk holds this tensor");
  std::vector<const DcpChunkView*> order;
  for (const auto& c : chunks) {
    for (size_t a = 0; a < shape.size(); ++a)
      FTX_CHECK(static_cast<int>(a) == split_axis || (c.offsets[a] == 0 && c.view.shape[a] == shape[a]), what,
                "is stored in chunks split along axis " + std::to_string(a) + " (chunk at " +
                    shape_to_string(c.offsets) + " of size " + shape_to_string(c.view.shape) + "), expected " +
                    (split_axis < 0 ? std::string("one chunk") : "splits along axis " + std::to_string(split_axis) +
                                                                     " only"));
    order.push_back(&c);
  }
  FTX_CHECK(split_axis >= 0 || order.size() == 1, what, "is stored in " + std::to_string(order.size()) + " chunks");
  const size_t ax = split_axis < 0 ? 0 : static_cast<size_t>(split_axis);
  std::sort(order.begin(), order.end(),
            [&](const DcpChunkView* x, const DcpChunkView* y) { return x->offsets[ax] < y->offsets[ax]; });
  std::vector<TensorView> out;
  int64_t next = 0;
  for (const DcpChunkView* c : order) {
    if (split_axis >= 0) {
      FTX_CHECK(c->offsets[ax] == next, what, "chunks leave a gap or overlap at " + std::to_string(next) +
                                                  " on axis " + std::to_string(ax));
      next += c->view.shape[ax];
    }
    c->view.validate(what);
    out.push_back(c->view);
  }
  FTX_CHECK(split_axis < 0 || next == shape[ax], what,
            "chunks cover " + std::to_string(next) + " of " + std::to_string(shape[ax]) + " on axis " + std::to_string(ax));
  return out;
}

}  // namespace ftx
