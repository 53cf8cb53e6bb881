#pragma once
// Collects the tensors of a tensor+pipeline-parallel training checkpoint (Megatron, NeMo) under
// global names and turns them into TensorJobs through a layout table.
#include <map>
#include <string>
#include <vector>

#include "formats/value.h"
#include "lib/convert/layout_table.h"

namespace ftx {

class ShardGroups {
 public:
  explicit ShardGroups(int64_t tp) : tp_(tp) {}
  // `local_name` as stored in the pipeline stage; "layers.N." is renumbered by `layer_offset`.
  void add(const std::string& local_name, int64_t layer_offset, int64_t tp_rank, const TensorView& t,
           const std::string& shard_origin);
  // Highest global layer index seen + 1.
  int64_t num_layers() const { return max_layer_ + 1; }
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  const std::vector<TensorView>& shards(const std::string& name) const;
  // One job (or two, gated) per tensor. Every tensor must be present on every TP rank.
  void build_jobs(const ArchLayout& layout, const JobContext& ctx, const std::string& origin,
                  std::vector<TensorJob>& jobs) const;

 private:
  struct Group {
    std::string name;
    std::vector<TensorView> shards;
    std::vector<bool> present;
    std::vector<std::string> origins;
  };
  int64_t tp_;
  int64_t max_layer_ = -1;
  std::vector<Group> groups_;
  std::map<std::string, size_t> index_;
};

// Python's str() of a pickled value, as FT's `f"{k}:{v}"` writes args.txt.
std::string python_str(const ValuePtr& v);

}  // namespace ftx
