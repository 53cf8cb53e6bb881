#pragma once
// HuggingFace architectures beyond GPT-2/GPTBigCode: GPT-J, GPT-NeoX, BLOOM, OPT, XGLM
// (hf_arch_source.cc). plan_hf dispatches here by model_type.
#include <string>

#include <nlohmann/json.hpp>

#include "lib/convert/conversion.h"

namespace ftx {

// The canonical model_type ("gptj", "gpt_neox", "bloom", "opt", "xglm") for a config.json
// model_type or --model value (aliases gpt-j, gptneox, gpt-neox), or "" when not one of these.
std::string hf_arch_model_type(const std::string& model_type);

// Plans the conversion of the HF folder `folder` whose config.json is `config`.
ConversionPlan plan_hf_arch(const ConvertOptions& opt, const std::string& model_type, const nlohmann::json& config,
                            const std::string& folder);

}  // namespace ftx
