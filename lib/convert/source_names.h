#pragma once
// A tensor the configuration needs and the checkpoint lacks, named as the checkpoint would name it
// (model.layers.1.mlp.down_proj.weight), not as the FT file it would become (dense_4h_to_h): a
// layout table's rules read backwards, and the prefix the adapter stripped put back.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/convert/layout_table.h"

namespace ftx {

// The source names (as the rules see them, adapter prefixes stripped) of the rules that produce
// FT's `ft_name`: {"layers.1.mlp.down_proj.weight"} for "model.layers.1.mlp.dense_4h_to_h.weight"
// in the Llama layout; several for q/k/v parts or alternative spellings; none when no rule gives it
// (a tensor the adapter computes). For messages about a missing tensor, in the checkpoint's names.
std::vector<std::string> layout_source_names(const ArchLayout& layout, const std::string& ft_name);

// The prefixes a checkpoint's names carry before an adapter strips them ("model." of
// "model.layers.0.mlp.down_proj.weight"), by the stripped name's first component, so that a
// tensor the checkpoint lacks is named the way its other tensors are.
class NamePrefixes {
 public:
  void add(const std::string& original, const std::string& stripped);
  // `stripped` with the prefix its first component has in the checkpoint (else the commonest one).
  std::string restore(const std::string& stripped) const;

 private:
  std::map<std::string, std::string> by_first_;
  std::map<std::string, int64_t> count_;
};
// ConversionPlan::source_names for a plan built through `layout`: the layout's source names of an
// FT tensor, prefixes restored.
std::function<std::vector<std::string>(const std::string&)> checkpoint_names(const ArchLayout& layout,
                                                                            NamePrefixes prefixes);

}  // namespace ftx
