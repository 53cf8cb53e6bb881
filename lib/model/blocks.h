#pragma once
// The shared blocks a model is configured from (ModelConfig, model_config.h): where positions come
// from, how rotary pairs dimensions, where the norms sit and which norm, the attention's heads, the
// activation. The op seam (lib/ops/backend.h) names some of them too, so they live here, apart from
// the config's parsing and the checkpoints' keys.

namespace ftx {

enum class PositionEmbedding { kLearned, kRotary, kAlibi, kSinusoidal, kNone };
enum class RotaryStyle { kInterleaved /* GPT-J: pairs (2i,2i+1) */, kHalfSplit /* NeoX: (i, i+r/2) */ };
enum class NormPlacement { kPre, kPost };
// The FFN's pointwise function.
enum class Nonlinearity {
  kGeluErf /* exact */, kGeluTanh /* gelu_new, gelu_fast, gelu_pytorch_tanh */, kRelu, kSilu,
  kSquaredRelu /* relu(x)^2: Megatron Core / NeMo squared-relu */
};
// The FFN's activation: a nonlinearity, and whether it is gated (GLU: f(x + b) * (gate + gate_b),
// the gate from its own GEMM). Every "is this FFN gated" question reads is_gated(); the named
// constants are the combinations checkpoints use (kGeGlu is erf GELU; Gemma's is kGeGluTanh).
class Activation {
 public:
  constexpr Activation() = default;
  constexpr explicit Activation(Nonlinearity f, bool gated = false) : f_(f), gated_(gated) {}
  constexpr Nonlinearity nonlinearity() const { return f_; }
  constexpr bool is_gated() const { return gated_; }
  constexpr bool operator==(Activation o) const { return f_ == o.f_ && gated_ == o.gated_; }
  constexpr bool operator!=(Activation o) const { return !(*this == o); }

  static const Activation kGelu, kGeluTanh, kRelu, kSilu, kSquaredRelu, kSwiGlu, kGeGlu, kGeGluTanh;

 private:
  Nonlinearity f_ = Nonlinearity::kGeluErf;
  bool gated_ = false;
};
inline constexpr Activation Activation::kGelu{Nonlinearity::kGeluErf};
inline constexpr Activation Activation::kGeluTanh{Nonlinearity::kGeluTanh};
inline constexpr Activation Activation::kRelu{Nonlinearity::kRelu};
inline constexpr Activation Activation::kSilu{Nonlinearity::kSilu};
inline constexpr Activation Activation::kSquaredRelu{Nonlinearity::kSquaredRelu};
inline constexpr Activation Activation::kSwiGlu{Nonlinearity::kSilu, true};
inline constexpr Activation Activation::kGeGlu{Nonlinearity::kGeluErf, true};
inline constexpr Activation Activation::kGeGluTanh{Nonlinearity::kGeluTanh, true};
// LayerNorm (gamma, beta) or RMSNorm (gamma only: x / sqrt(mean(x^2) + eps) * gamma).
enum class Normalization { kLayerNorm, kRmsNorm };
enum class AttentionKind { kMultiHead, kMultiQuery };
// How a mixture-of-experts router turns its logits into the weights of the chosen experts: a
// softmax over all experts in fp32, the top k, and then (kSoftmaxTopKRenorm, Mixtral; Qwen3-MoE's
// norm_topk_prob true) those k renormalised to sum to 1, or (kSoftmaxTopK, Qwen2-MoE's
// norm_topk_prob false) kept as they are.
enum class MoeRouting { kSoftmaxTopKRenorm, kSoftmaxTopK };

}  // namespace ftx
