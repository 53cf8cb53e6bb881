#pragma once
// Megatron-DeepSpeed MoE GPT checkpoints (DeepSpeed's tag folder: mp_rank_XX_model_states.pt and
// layer_N_expert_E_mp_rank_XX_model_states.pt) into FasterTransformer's GPT-MoE layout, as FT's
// examples/pytorch/gpt/utils/megatron_gpt_moe_ckpt_convert.py writes it (docs/ft-layout.md#mixture-of-experts).
#include <string>

#include "lib/convert/conversion.h"

namespace ftx {

// Whether `dir` holds DeepSpeed model-state shards (mp_rank_00_model_states.pt and the other names
// FT's MoE converter looks for) rather than Megatron-LM's mp_rank_XX/model_optim_rng.pt.
bool is_megatron_moe_dir(const std::string& dir);
ConversionPlan plan_megatron_moe(const ConvertOptions& opt, const std::string& dir);

}  // namespace ftx
