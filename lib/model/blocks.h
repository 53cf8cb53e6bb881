#pragma once
// The shared blocks a model is configured from (ModelConfig, model_config.h): where positions come
// from, how rotary pairs dimensions, where the norms sit and which norm, the attention's heads, the
// activation. The op seam (lib/ops/backend.h) names some of them too, so they live here, apart from
// the config's parsing and the checkpoints' keys.

namespace ftx {

enum class PositionEmbedding { kLearned, kRotary, kAlibi, kSinusoidal, kNone };
enum class RotaryStyle { kInterleaved /* GPT-J: pairs (2i,2i+1) */, kHalfSplit /* NeoX: (i, i+r/2) */ };
enum class NormPlacement { kPre, kPost };
enum class Activation {
  kGelu /* exact erf */, kGeluTanh /* gelu_new, gelu_fast */, kRelu, kSilu, kSwiGlu, kGeGlu,
  kSquaredRelu /* relu(x)^2: Megatron Core / NeMo squared-relu */
};
// LayerNorm (gamma, beta) or RMSNorm (gamma only: x / sqrt(mean(x^2) + eps) * gamma).
enum class Normalization { kLayerNorm, kRmsNorm };
enum class AttentionKind { kMultiHead, kMultiQuery };

}  // namespace ftx
