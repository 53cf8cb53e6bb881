#pragma once
// HuggingFace Llama, Mistral and Qwen2 (hf_llama_source.cc): rotary, grouped-query attention,
// SwiGLU, RMSNorm, into the FT layout the Megatron Core conversions write for the same pieces.
#include <string>

#include <nlohmann/json.hpp>

#include "lib/convert/conversion.h"

namespace ftx {

// "llama", "mistral" or "qwen2" for a config.json model_type or --model value, else "".
std::string hf_llama_model_type(const std::string& model_type);

ConversionPlan plan_hf_llama(const ConvertOptions& opt, const std::string& model_type, const nlohmann::json& config,
                             const std::string& folder);

}  // namespace ftx
