#pragma once
// What a Megatron Core GPT is, from Megatron-LM's `args` (a legacy shard's, or common.pt's of a
// torch_dist checkpoint) or NeMo's model_config.yaml (mcore_gpt), and the FT ModelConfig and job
// context it implies. Options ftx cannot run (shared experts and router options, multi-latent
// attention, virtual pipeline, QK layernorm, ...) are refused here with a one-line error naming the
// argument.
#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

#include "formats/value.h"
#include "lib/convert/layout_table.h"
#include "lib/model/model_config.h"

namespace ftx {

struct McoreArgs {
  int64_t num_layers = 0, hidden = 0, ffn_hidden = 0, heads = 0, query_groups = 0;
  int64_t max_position_embeddings = 0;
  int64_t padded_vocab = 0;             // 0: the embedding table's rows
  int64_t tp = 1, pp = 1;               // training sizes (legacy shards; a dist checkpoint is global)
  std::string position = "learned_absolute";  // learned_absolute | rope | none
  double rotary_percent = 1.0, rotary_base = 10000.0;
  bool rmsnorm = false;
  bool layernorm1p = false;             // zero-centred gamma: weights stored as gamma - 1
  double eps = 1e-5;
  bool bias = true;
  bool tied = true;                     // share_embeddings_and_output_weights
  // Where `tied` comes from, and how to say otherwise, for tied_output_layer.h's error.
  std::string tied_because, untie_hint;
  Activation activation = Activation::kGelu;
  // Mixture of experts (Megatron Core's MoELayer in every layer; 0 experts: dense): the router's
  // top-k, whether its softmax runs before the top-k (moe_router_pre_softmax: the chosen
  // probabilities as they are) or after it (over the k chosen logits, which is the softmax over
  // all renormalised to the k), each expert's FFN size, and the expert-parallel training size.
  int64_t experts = 0, moe_topk = 0, moe_ffn_hidden = 0, ep = 1;
  bool moe_pre_softmax = false;
};

// `args` may be null only when `origin` is a checkpoint that has none: then an Error.
McoreArgs mcore_args_from_megatron(const ValuePtr& args, const std::string& origin);
McoreArgs mcore_args_from_nemo(const YAML::Node& cfg, const std::string& origin);

// The FT configuration (vocab_size = `vocab_rows` when args carry no padded size); start/end ids
// are left for the adapter.
ModelConfig mcore_model_config(const McoreArgs& a, int64_t vocab_rows, const std::string& origin);

// The job context for training shards of `shards` ways (a dist checkpoint's chunks along the
// split axis are such shards too).
JobContext mcore_job_context(const McoreArgs& a, int64_t shards);

}  // namespace ftx
