#pragma once
// ModelConfig: one struct for every architecture ftx runs. A model is configuration over shared
// blocks (position scheme, norm placement, parallel residual, attention kind, activation), not a
// class per architecture. Read from and written to config.ini in both FT's key style ([gpt]/[gptj]/
// [gptneox] head_num, size_per_head, ...) and TensorRT-LLM's (n_embd, n_head, ...), plus ftx's own
// keys so that ftx never has to guess.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/ft_dir.h"
#include "lib/model/blocks.h"
#include "lib/model/rope_scaling.h"

namespace ftx {

// Which variant of FasterTransformer's layout a folder is: FT's GPT, GPT-J and GPT-NeoX model
// classes (their config.ini sections), and the variants of the [gpt] section written for BLOOM, OPT,
// XGLM and GPTBigCode (their defaults; config.ini's `architecture` key names it). It is not the
// model's architecture: a Llama, Mistral, Qwen, Phi-3 or Gemma folder is a kGpt folder whose blocks
// (norms, activation, rotary, heads) ftx's own config.ini keys state, as ModelConfig's fields hold them.
enum class FtVariant { kGpt, kGptJ, kGptNeoX, kBloom, kOpt, kXglm, kGptBigCode };

const char* ft_variant_name(FtVariant v);      // "gpt", "gptj", "gptneox", "bloom", "opt", "xglm", "gpt_bigcode"
FtVariant ft_variant_from_name(const std::string& s);  // Error listing the supported names
const char* activation_name(Activation a);          // FT spelling: Gelu, Relu, Silu, SiGLU, GeGLU; "gelu_tanh", "geglu_tanh" for ftx
Activation activation_from_name(const std::string& s);  // accepts FT, HF and NeMo spellings

// Prompt learning: config.ini's num_tasks, prompt_learning_start_id,
// prompt_learning_type and [task_K] task_name, prompt_length. Task K's table is
// model.prompt_table.<name>.weight.bin (p-tuning) or model.prefix_prompt.<name>.weight.R.bin (prefix).
enum class PromptLearningType { kNone = 0, kSoftPrompt = 1, kPrefixPrompt = 2, kPTuning = 3 };
struct PromptTask {
  std::string name;
  int64_t length = 0;  // virtual tokens (table rows)
};
struct PromptLearning {
  PromptLearningType type = PromptLearningType::kNone;
  int64_t start_id = -1;  // an input id >= start_id is a virtual token (FT's default: end_id + 1)
  std::vector<PromptTask> tasks;
  bool any() const { return !tasks.empty(); }
  // Index of a task given by name or by decimal id; -1 when there is none.
  int64_t find(const std::string& name_or_id) const;
};

// The largest size (heads, head size, FFN size, layers, vocabulary, positions) ftx accepts from a
// file: products of sizes stay far from int64 overflow before anyone multiplies them.
constexpr int64_t kMaxModelDim = int64_t(1) << 24;

// How the folder stores the layer GEMMs' weights: as floats (<gemm>.weight.R.bin), as INT4 with
// group scales (the four int4 files of lib/model/int4_files.h instead; ftx convert-hf's GPTQ, AWQ and
// compressed-tensors int4 import writes them), or as INT8 with column scales (the two files of
// lib/model/int8_files.h; the compressed-tensors W8A16 import writes them). config.ini's
// [ftx-section] weight_only_precision = int4 (with int4_group_size) or int8.
enum class WeightOnlyPrecision { kNone, kInt4, kInt8 };
const char* weight_only_precision_name(WeightOnlyPrecision p);  // "none", "int4", "int8"

struct ModelConfig {
  FtVariant ft_variant = FtVariant::kGpt;
  std::string model_name = "gpt";
  int64_t head_num = 0;
  int64_t size_per_head = 0;
  // The model width (the residual stream, embeddings, norms, FFN input). 0: head_num ×
  // size_per_head, which every model had before Qwen3/Gemma made head_dim a size of its own.
  int64_t hidden_size = 0;
  int64_t kv_head_num = 0;          // 1 for multi-query; == head_num for multi-head; else grouped (GQA)
  int64_t inter_size = 0;
  int64_t num_layer = 0;
  int64_t vocab_size = 0;
  int64_t max_pos_seq_len = 0;      // 0 when the model has no position table
  int64_t start_id = 0;
  int64_t end_id = 0;
  double layernorm_eps = 1e-5;

  PositionEmbedding position = PositionEmbedding::kLearned;
  int64_t position_offset = 0;      // OPT/XGLM: table row = position + offset (FT files already drop it)
  RotaryStyle rotary_style = RotaryStyle::kHalfSplit;
  int64_t rotary_dim = 0;           // rotary dims per head (0 when no rotary)
  double rotary_base = 10000.0;
  RopeScaling rope_scaling;         // scaled rotary frequencies (Llama 3.1 llama3, linear, Qwen3 yarn); none by default
  // > 0: the layers with a window (layer_window) rotate with this base and no scaling, the others
  // with rotary_base and rope_scaling (Gemma 3's local and global rope: rope_local_base_freq, or
  // rope_parameters' sliding_attention and full_attention sets). 0: every layer as the others.
  double rotary_base_local = 0.0;
  NormPlacement norm = NormPlacement::kPre;
  // Pre-norm models only: the attention's and the FFN's outputs are normalised too, each with its
  // own gamma, after the all-reduce and before the residual add (Gemma 2/3's post_attention_layernorm
  // and post_feedforward_layernorm): x += norm(attn(norm1 x)); x += norm(ffn(norm2 x)).
  bool sandwich_norm = false;
  bool parallel_residual = false;   // y = x + attn(ln1 x) + mlp(ln2 x)   (GPT-J: one LN, NeoX: two)
  bool shared_input_norm = false;   // GPT-J: attention and FFN read the same LN output
  Activation activation = Activation::kGelu;
  Normalization normalization = Normalization::kLayerNorm;  // of every norm (RMSNorm: no bias files)
  // Every norm scales by (1 + γ) (Gemma's RMSNorm): the files keep the checkpoint's γ, and the
  // loader adds 1 in fp32 to each norm's gamma (the layers', the final and the per-head Q/K norms).
  bool norm_unit_offset = false;
  AttentionKind attention = AttentionKind::kMultiHead;
  bool has_bias = true;             // linear biases (NeMo GPT-Next may have none)
  bool qkv_bias = false;            // without has_bias: the QKV projection alone has a bias (Qwen2)
  // RMSNorm over each head of Q and of K (gamma [size_per_head] per layer, eps layernorm_eps), after
  // the QKV bias and before rotary (Qwen3's q_norm / k_norm).
  bool qk_norm = false;
  // > 0: the factor of Q·Kᵀ in place of 1/sqrt(size_per_head) (Gemma's query_pre_attn_scalar^-1/2).
  double attention_scale = 0.0;
  // > 0: softcaps, x = cap·tanh(x / cap): of the attention scores after the scale, before the mask
  // (Gemma 2's attn_logit_softcapping), and of the logits after the lm_head (final_logit_softcapping).
  double attention_softcap = 0.0;
  double final_logit_softcap = 0.0;
  // > 0: each token attends only to the last sliding_window positions (itself included; Mistral).
  // The engine runs it with a circular cache of exactly that length and refuses positions beyond
  // it otherwise.
  int64_t sliding_window = 0;
  // Per-layer sliding windows (Gemma 2/3's layer_types): empty, or one entry per layer; w > 0: the
  // layer's query at position p sees positions p - w + 1 .. p only (AttentionShape::window), 0: every
  // earlier position. Unlike sliding_window, the KV cache keeps every position of every layer and
  // the windowed layers mask the older keys: nothing is freed or wrapped.
  std::vector<int64_t> layer_window;
  int64_t window_of(int64_t layer) const {
    return layer_window.empty() ? 0 : layer_window[static_cast<size_t>(layer)];
  }
  bool has_pre_decoder_layernorm = false;   // BLOOM word_embeddings_layernorm
  bool has_post_decoder_layernorm = true;   // final layernorm
  bool tied_embeddings = true;      // no model.lm_head.weight.bin: logits use wte
  bool has_lm_head_bias = false;    // GPT-J
  double embedding_scale = 1.0;     // XGLM sqrt(d) when not folded into wte

  int64_t tensor_para_size = 1;     // the TP size the folder was written for
  DType weight_data_type = DType::kFloat32;
  // kInt4 (kInt8): every layer GEMM (QKV, attention.dense, the FFN's, the gate included) is stored as INT4
  // files, and ft_weight_files lists no float file for it; the embeddings, norms and lm_head stay floats.
  WeightOnlyPrecision weight_only_precision = WeightOnlyPrecision::kNone;
  // With kInt4: the input rows per group of the files without a g_idx file (read_int4_files);
  // 0: one group spans each GEMM's whole input (per-channel scales).
  int64_t int4_group_size = 0;
  bool holds_int4() const { return weight_only_precision == WeightOnlyPrecision::kInt4; }
  // kInt8: every layer GEMM is stored as pre-quantised INT8 files (lib/model/int8_files.h), likewise.
  bool holds_int8() const { return weight_only_precision == WeightOnlyPrecision::kInt8; }

  PromptLearning prompt;            // tasks and their tables' kind (none unless config.ini has them)

  // Mixture of experts (docs/ft-layout.md#mixture-of-experts). FT's GPT-MoE [structure] section:
  // gpt_with_moe, expert_num, moe_layers (the layers whose FFN is expert_num experts of inter_size
  // each, routed per token; the others are dense). FT takes the top-k (moe_k) at run time; for the
  // models ftx converts it is part of the model, ftx's key moe_top_k, as is the routing (moe_router).
  int64_t expert_num = 0;           // 0: a dense model
  std::vector<int64_t> moe_layers;  // ascending, each in [0, num_layer)
  int64_t moe_top_k = 0;
  MoeRouting moe_routing = MoeRouting::kSoftmaxTopKRenorm;
  // ftx's keys for what FT's GPT-MoE lacks (Qwen2-MoE, Qwen3-MoE): each expert's width when it is
  // not inter_size (moe_inter_size; inter_size stays the dense layers'), and a shared expert of
  // moe_shared_expert_inter_size in every layer of experts, weighed by its sigmoid gate (0: none).
  int64_t moe_inter_size = 0;
  int64_t moe_shared_inter_size = 0;
  int64_t expert_inter() const { return moe_inter_size > 0 ? moe_inter_size : inter_size; }
  // Expert parallelism (TensorRT-LLM's moe_ep_size; ftx's config key of that name): 1, every
  // expert's FFN sliced over the tensor-parallel ranks (FT's layout); tensor_para_size, the experts
  // whole, rank r holding experts [r·E/P, (r+1)·E/P) (docs/parallelism.md#expert-parallelism).
  int64_t moe_ep_size = 1;
  bool is_moe() const { return expert_num > 0; }
  // The inter_size columns of each expert one rank holds, at `tp` ranks.
  int64_t moe_local_inter(int64_t tp) const { return moe_ep_size > 1 ? expert_inter() : expert_inter() / tp; }
  bool is_moe_layer(int64_t layer) const;

  // The residual width, and the attention's: Q's columns and attention.dense's input.
  int64_t hidden() const { return hidden_size > 0 ? hidden_size : q_width(); }
  int64_t q_width() const { return head_num * size_per_head; }
  // Key/value heads held by one of `tp` ranks: all of them (1) for multi-query, else kv_head_num / tp.
  int64_t kv_heads_per_rank(int64_t tp) const;

  // Parses `<dir>/config.ini`. Requires the keys FT's readers require; Errors name the missing key.
  static ModelConfig from_ini(const IniFile& ini);
  // Writes FT keys (for the section FT's runtime reads for this architecture), TensorRT-LLM keys,
  // and ftx keys (architecture, activation, position embedding, rotary, eps, tied embeddings).
  IniFile to_ini() const;
  // Checks invariants (positive sizes, head_num % tp == 0, inter_size % tp == 0, ...).
  void validate(int64_t tp, const std::string& origin) const;
};

}  // namespace ftx
