#pragma once
// A distributed checkpoint's global tensor, seen the way TensorJobs want training shards: the
// chunks that hold one layer of a layer-stacked tensor ([layers, ...] in Megatron Core), cut to a
// range of one axis (a gated linear_fc1's halves) and ordered along the axis they split. Every
// result is a view into the chunk's mapped bytes: nothing is copied or read here.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/dcp_checkpoint.h"

namespace ftx {

// Chunks of a tensor with their place in it; `view` has the chunk's shape.
using ChunkViews = std::vector<DcpChunkView>;

// The chunks' parts at index `index` of axis 0, with that axis removed.
ChunkViews select_index(const ChunkViews& chunks, int64_t index);
// The chunks' parts within [begin, end) of `axis`, offsets made relative to `begin`.
ChunkViews narrow_range(const ChunkViews& chunks, size_t axis, int64_t begin, int64_t end);
// The chunks as shards along `axis`, in order: every chunk must span the whole of every other axis
// of `shape` (the global shape after selection) and together they must tile `axis`. `split_axis`
// < 0 means the tensor must be one chunk. Error naming `what` otherwise.
std::vector<TensorView> shards_along(const ChunkViews& chunks, const std::vector<int64_t>& shape, int split_axis,
                                     const std::string& what);

}  // namespace ftx
