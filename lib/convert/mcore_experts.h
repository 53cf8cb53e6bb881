#pragma once
// The experts of Megatron Core's MoE layers (issue 51) as FT's GPT-MoE stacked-expert jobs
// (docs/ft-layout.md#mixture-of-experts). Megatron Core names an expert's GEMMs two ways:
//   SequentialMLP   layers.N.mlp.experts.local_experts.E.linear_fc1.weight   (local spec, no TE)
//   TEGroupedMLP    layers.N.mlp.experts.linear_fc1.weightE                  (--moe-grouped-gemm)
// with E the expert's index on its expert-parallel rank (legacy shards); a torch_dist checkpoint
// holds both as layers.mlp.experts.experts.linear_fc1.weight [layers, experts, out, in]. linear_fc1
// is column-parallel ([activated | multiplied] halves per shard when gated), linear_fc2 row-parallel,
// as a dense MLP's are. The router (mlp.router.weight) is a layout rule (mcore_gpt_layout).
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "formats/dcp_checkpoint.h"
#include "lib/convert/mcore_model.h"
#include "lib/convert/tensor_job.h"

namespace ftx {

// Whether a layout name (without `decoder.`) belongs to a layer's experts or shared experts: such
// names go to McoreExperts, not to the layout table.
bool is_mcore_expert_name(const std::string& name);

class McoreExperts {
 public:
  explicit McoreExperts(const McoreArgs& a) : a_(a) {}
  // A legacy shard's tensor (`name` as stored, decoder.layers.N..., with the stage's local layer
  // number; errors name it so): expert e of
  // expert-parallel rank `ep_rank` is global expert ep_rank · experts / ep + e. Skips _extra_state;
  // refuses shared experts and anything but the two GEMMs' weights by name.
  void add_legacy(const std::string& name, int64_t layer_offset, int64_t tp_rank, int64_t ep_rank,
                  const TensorView& t, const std::string& origin);
  // The jobs of every layer's experts, each complete on every training rank (else Error naming the
  // missing tensor).
  void build_legacy_jobs(const std::string& origin, std::vector<TensorJob>& jobs) const;

 private:
  const McoreArgs& a_;
  // (layer, 1 | 2 for linear_fc1 | linear_fc2, global expert) -> the TP shards.
  std::map<std::tuple<int64_t, int, int64_t>, std::vector<TensorView>> shards_;
  std::map<std::tuple<int64_t, int, int64_t>, std::string> origins_;
};

// A torch_dist tensor of experts (`name` stored, `layout` its name without prefixes and
// `decoder.`): the jobs of every layer's experts, or nothing for _extra_state; Error for others.
void add_mcore_dist_expert_jobs(const McoreArgs& a, const DcpCheckpoint& ck, const std::string& name,
                                const std::string& layout, std::vector<TensorJob>& jobs);

}  // namespace ftx
