#pragma once
// What Llama, Mistral and Qwen2 share (llama_like.cc): rotary, grouped-query attention, SwiGLU,
// RMSNorm, into the FT layout the Megatron Core conversions write for the same pieces. Each
// family's file adds its own keys, biases and sliding window.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/convert/hf/family.h"

namespace ftx::hf {

struct LlamaLike {
  std::string model_type;  // canonical
  std::vector<std::string> spellings;
  int order = 0;
  std::string display;
  std::string examples;
  const std::vector<KeyRule>& (*keys)() = nullptr;
  int64_t default_eos = 2;  // eos_token_id when absent
  // has_bias / qkv_bias from the family's bias keys.
  void (*biases)(const json& j, const std::string& origin, ModelConfig& c) = nullptr;
  // The sliding window the model attends with, 0 for none.
  int64_t (*sliding_window)(const json& j, int64_t layers, const std::string& origin) = nullptr;
};

// The keys every llama-like config has (the family's file adds its own).
std::vector<KeyRule> llama_like_keys();
// sliding_window: 0 when absent or null, else a positive integer (Error naming it otherwise).
int64_t sliding_window_key(const json& j, const std::string& origin);
HfFamily llama_like_family(const LlamaLike& spec);

}  // namespace ftx::hf
