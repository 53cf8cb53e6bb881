// What FasterTransformer's Triton model classes read from DIR/config.ini, and what each fixes in
// code, against every fact ftx's config.ini records (ModelConfig::to_ini; TensorRT-LLM's keys state
// the same facts and check_config_ini makes them agree). Sources: the classes' constructors
// (src/fastertransformer/triton_backend/multi_gpu_gpt/ParallelGptTritonModel.cc, gptj/
// GptJTritonModel.cc, gptneox/GptNeoXTritonModel.cc), the models they build (models/gptj/GptJ.h,
// models/gptneox/GptNeoX.h, models/multi_gpu_gpt/ParallelGptDecoder.cc), their weight loaders and
// the rotary kernel (kernels/decoder_masked_multihead_attention_utils.h: base 10000 in code).
//
// fact (config.ini keys)              GPT (ParallelGpt)       GPT-J (GptJ)            GPT-NeoX (GptNeoX)
// head_num, size_per_head, inter_size,
//   num_layer, vocab_size, start_id,
//   end_id, model_name, num_tasks,
//   prompt_learning_*, [task_K]        read                    read                    read
// weight_data_type                    read (getModelFileType) read                    read
// tensor_para_size                    config.pbtxt's (triton_repo.cc checks they are equal)
// max_pos_seq_len                     read (position rows)    not read: no table (ftx: a context limit at most)
// layernorm_eps (layer_norm_epsilon)  read                    fixed 1e-6              fixed 1e-5
// layernorm_type (do_layer_norm_      read                    fixed pre               fixed pre
//   before)
// has_pre/post_decoder_layernorm      read                    no pre, always post: ftx's layout for the class
// activation (activation_type,        Gelu, Relu (no other    fixed GELU              fixed GELU
//   activation_function)              FFN layer is built)
// position_embedding_type (has_       read: learned, ALiBi    fixed rotary            fixed rotary
//   positional_encoding, use_attention_ or none
//   linear_bias, rotary_pct)
// position_offset                     none to apply: ftx drops OPT's offset rows from model.wpe.bin
// rotary_dim (rotary_embedding)       -                       read                    read
// rotary_style                        -                       fixed interleaved       fixed half_split
// rotary_base                         -                       fixed 10000             fixed 10000
// rotary_scaling_*                    -                       fixed none              fixed none
// parallel_residual (use_gptj_        fixed sequential        fixed parallel          read
//   residual)
// shared_input_norm                   - (sequential)          fixed shared            fixed two norms
// kv_head_num (multi_query_mode)      fixed = head_num        fixed = head_num        fixed = head_num
// normalization                       fixed LayerNorm         fixed LayerNorm         fixed LayerNorm
// has_bias, qkv_bias (bias)           fixed: every bias       the class's fixed biases: ftx's layout for it
// sliding_window                      fixed none              fixed none              fixed none
// qk_norm                             fixed none              fixed none              fixed none
// sandwich_norm, norm_unit_offset,
//   attention_scale, attention_softcap,
//   final_logit_softcap, layer_window,
//   rotary_base_local                 fixed none              fixed none              fixed none
// tied_embeddings                     model.lm_head.weight.bin's presence, for FT as for ftx; GPT-J, NeoX: never
// has_lm_head_bias                    the files: GPT and GPT-NeoX have none, GPT-J always (ftx's layout)
// embedding_scale                     fixed 1                 fixed 1                 fixed 1
// has_adapters                        read; ftx refuses it when it reads config.ini (it runs no adapters)
// architecture, model_variant         which class: gptj, gptneox, else GPT (not read by the constructors)
//
// Anything "fixed" that the folder has otherwise is refused, with two exceptions that FT's own
// converters make for the models it serves: an exact (erf) GELU runs as FT's tanh GELU (|difference|
// <= 4.8e-4, below fp16's step at 1), and GPT-J's and GPT-NeoX's fixed LayerNorm eps stands for any
// eps up to 1e-5 (GPT-J checkpoints have 1e-5, FT runs 1e-6; the normalised values then differ by
// less than 1e-5 / (2 variance), relatively). A larger eps is refused.
#include "lib/serve/ft_model_class.h"

#include <cstdio>
#include <string>
#include <vector>

#include "formats/error.h"

namespace ftx::serve {

namespace {

constexpr double kFtRotaryBase = 10000.0;
constexpr double kMaxFixedEps = 1e-5;

const char* class_name(FtModelType t) {
  switch (t) {
    case FtModelType::kGpt: return "ParallelGptTritonModel";
    case FtModelType::kGptJ: return "GptJTritonModel";
    case FtModelType::kGptNeoX: return "GptNeoXTritonModel";
  }
  return "";
}

class Refusals {
 public:
  Refusals(const ModelConfig& cfg, const IniFile& ini, FtModelType t)
      : ini_(ini), written_(cfg.to_ini()), type_(t) {
    sec_ = t == FtModelType::kGptJ ? "gptj" : t == FtModelType::kGptNeoX ? "gptneox" : "gpt";
  }

  // Unless `ok`: refuse the fact under the first of `keys` the folder's config.ini has (else the
  // first ftx writes for it), with its value, and what the class runs instead.
  void need(bool ok, const std::vector<const char*>& keys, const std::string& runs) const {
    if (ok) return;
    const char* key = keys.front();
    std::string value;
    for (const char* k : keys)
      if (ini_.has(sec_, k)) { key = k; value = ini_.get(sec_, k); break; }
    if (value.empty()) {
      for (const char* k : keys)
        if (written_.has(sec_, k)) { key = k; value = written_.get(sec_, k); break; }
    }
    throw Error(ini_.path(), "[" + sec_ + "] " + key + " = " + (value.empty() ? "(absent)" : value) +
                                 ": FasterTransformer's " + ft_model_type_name(type_) + " model (" +
                                 class_name(type_) + ") " + runs + "; serve this model with ftx generate");
  }

 private:
  const IniFile& ini_;
  const IniFile written_;  // what ftx would write for the folder: the value of a key the file lacks
  FtModelType type_;
  std::string sec_;
};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool gelu(Activation a) { return a == Activation::kGelu || a == Activation::kGeluTanh; }

const std::vector<const char*> kActivation = {"activation", "activation_type", "activation_function"};
const std::vector<const char*> kEps = {"layernorm_eps", "layer_norm_epsilon"};
const std::vector<const char*> kNormPlace = {"layernorm_type", "do_layer_norm_before"};
const std::vector<const char*> kPosition = {"position_embedding_type", "has_positional_encoding",
                                            "use_attention_linear_bias", "rotary_pct"};

// What no class has: grouped or multi-query attention, RMSNorm, a sliding window, Q/K norms, scaled embeddings,
// a model width other than head_num x size_per_head, Gemma's norms, scale, softcaps and per-layer windows.
void check_common(const Refusals& r, const ModelConfig& cfg) {
  r.need(cfg.kv_head_num == 0 || cfg.kv_head_num == cfg.head_num, {"kv_head_num", "multi_query_mode"},
         "runs multi-head attention only: a key/value head for each of the " + std::to_string(cfg.head_num) +
             " query heads (no multi-query or grouped-query attention)");
  r.need(cfg.normalization == Normalization::kLayerNorm, {"normalization"}, "runs LayerNorm only (no RMSNorm)");
  r.need(cfg.sliding_window == 0, {"sliding_window"}, "attends to every earlier position (no sliding window)");
  r.need(!cfg.qk_norm, {"qk_norm"}, "has no per-head norm of queries and keys");
  r.need(!cfg.sandwich_norm, {"sandwich_norm"}, "has no norms on the attention's and the FFN's outputs");
  r.need(!cfg.norm_unit_offset, {"norm_unit_offset"}, "scales its norms by gamma, not 1 + gamma");
  r.need(cfg.attention_scale == 0, {"attention_scale"}, "scales the attention scores by 1/sqrt(size_per_head) only");
  r.need(cfg.attention_softcap == 0, {"attention_softcap"}, "does not cap the attention scores");
  r.need(cfg.final_logit_softcap == 0, {"final_logit_softcap"}, "does not cap the logits");
  r.need(cfg.layer_window.empty() || cfg.layer_window == std::vector<int64_t>(cfg.layer_window.size(), 0),
         {"layer_window"}, "attends to every earlier position on every layer (no per-layer windows)");
  r.need(cfg.rotary_base_local == 0, {"rotary_base_local"}, "rotates every layer with one base");
  r.need(cfg.embedding_scale == 1.0, {"embedding_scale"}, "does not scale the embeddings");
  r.need(cfg.hidden() == cfg.q_width(), {"hidden_size", "n_embd"},
         "has a model width of head_num x size_per_head = " + std::to_string(cfg.q_width()) + " only");
}

void check_gpt(const Refusals& r, const ModelConfig& cfg) {
  r.need(cfg.position == PositionEmbedding::kLearned || cfg.position == PositionEmbedding::kAlibi ||
             cfg.position == PositionEmbedding::kNone,
         kPosition, "has a learned position table, ALiBi or no positions (no rotary or sinusoidal positions)");
  r.need(!cfg.parallel_residual, {"parallel_residual"},
         "adds attention and FFN one after the other (no parallel residual)");
  r.need(cfg.activation == Activation::kGeluTanh || cfg.activation == Activation::kGelu ||
             cfg.activation == Activation::kRelu,
         kActivation, "builds an FFN for Gelu and Relu only (no SiLU, gated or squared-ReLU FFN)");
  r.need(cfg.has_bias, {"has_bias", "bias"}, "loads a bias for every linear layer (these are absent)");
  check_common(r, cfg);
}

// GPT-J and GPT-NeoX: rotary LayerNorm models with everything but the rotary dims (and NeoX's
// residual) fixed in code.
void check_rotary_class(const Refusals& r, const ModelConfig& cfg, bool gptj) {
  const double eps = gptj ? 1e-6 : 1e-5;  // GptJ.h, GptNeoX.h: layernorm_eps_
  r.need(cfg.position == PositionEmbedding::kRotary, kPosition, "has rotary positions only");
  r.need(cfg.rotary_style == (gptj ? RotaryStyle::kInterleaved : RotaryStyle::kHalfSplit), {"rotary_style"},
         std::string("rotates ") + (gptj ? "interleaved pairs (interleaved)" : "the two halves (half_split)") +
             " only");
  r.need(cfg.rotary_base == kFtRotaryBase, {"rotary_base"},
         "reads no rotary base: it runs base " + fmt(kFtRotaryBase));
  r.need(cfg.rope_scaling.type == RopeScalingType::kNone, {"rotary_scaling_type"},
         "reads no rotary scaling: it runs unscaled frequencies");
  r.need(cfg.norm == NormPlacement::kPre, kNormPlace, "runs pre-LayerNorm only");
  if (gptj) {
    r.need(cfg.parallel_residual, {"parallel_residual"}, "adds attention and FFN in parallel only");
    r.need(cfg.shared_input_norm, {"shared_input_norm"}, "feeds attention and FFN one LayerNorm only");
  } else {
    r.need(!cfg.shared_input_norm, {"shared_input_norm"}, "has a LayerNorm for attention and one for the FFN");
  }
  r.need(gelu(cfg.activation), kActivation, "runs a GELU FFN only");
  r.need(cfg.layernorm_eps <= kMaxFixedEps * (1 + 1e-9), kEps,
         "reads no LayerNorm eps: it runs " + fmt(eps) + " (ftx accepts an eps up to " + fmt(kMaxFixedEps) + ")");
  check_common(r, cfg);
}

}  // namespace

FtModelType ft_model_class(const ModelConfig& cfg, const IniFile& ini) {
  const FtModelType t = cfg.ft_variant == FtVariant::kGptJ      ? FtModelType::kGptJ
                        : cfg.ft_variant == FtVariant::kGptNeoX ? FtModelType::kGptNeoX
                                                             : FtModelType::kGpt;
  const Refusals r(cfg, ini, t);
  if (t == FtModelType::kGpt) check_gpt(r, cfg);
  else check_rotary_class(r, cfg, t == FtModelType::kGptJ);
  return t;
}

}  // namespace ftx::serve
