#pragma once
// Megatron Core GPT sources: legacy torch.save shards with Megatron Core names (Megatron-LM
// --use-mcore-models without --use-dist-ckpt; NeMo mcore_gpt's model_weights.ckpt) and torch_dist
// distributed checkpoints (Megatron-LM --use-dist-ckpt; NeMo's model_weights/ folder, names
// prefixed `model.`). Both go through mcore_gpt_layout() and write what the NeMo GPT-Next and
// legacy Megatron paths write for the same model.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "lib/convert/conversion.h"
#include "lib/convert/megatron_files.h"
#include "lib/convert/nemo_files.h"

namespace ftx {

// A Megatron state dict (`model` of a shard) with Megatron Core names (decoder.*, embedding.*).
bool is_mcore_state_dict(const ValuePtr& model);

ConversionPlan plan_mcore_megatron_legacy(const ConvertOptions& opt, const std::string& dir,
                                          const std::vector<MegatronShardFile>& files, const ValuePtr& root0);
ConversionPlan plan_mcore_megatron_dist(const ConvertOptions& opt, const std::string& dir);

// A .nemo whose model is a Megatron Core GPT: `mcore_gpt: true`, or a distributed model_weights/.
bool is_mcore_nemo(const YAML::Node& cfg, const NemoFiles& files);
// Its model and weight jobs into `plan` (the tokenizer files are the caller's).
void plan_mcore_nemo_weights(const NemoFiles& files, const YAML::Node& cfg, const std::string& yorigin,
                             ConversionPlan& plan);

}  // namespace ftx
