#include "lib/model/qkv_columns.h"

namespace ftx {

std::vector<ColumnSegment> qkv_column_segments(const ModelConfig& cfg) {
  const int64_t d = cfg.size_per_head;
  const int64_t kv = cfg.kv_head_num > 0 ? cfg.kv_head_num : cfg.head_num;
  // One K/V head shared by several query heads is whole on every rank (ModelConfig::kv_heads_per_rank).
  const bool kv_whole = cfg.attention == AttentionKind::kMultiQuery || (kv == 1 && cfg.head_num > 1);
  return {{cfg.head_num * d, true}, {kv * d, !kv_whole}, {kv * d, !kv_whole}};
}

int64_t rank_columns(const std::vector<ColumnSegment>& segs, int64_t tp) {
  int64_t n = 0;
  for (const ColumnSegment& s : segs) n += s.split ? s.width / tp : s.width;
  return n;
}

}  // namespace ftx
