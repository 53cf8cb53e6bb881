// ModelConfig <-> config.ini.
//
// Three key sets share one section ([gpt], [gptj] or [gptneox]; docs/ft-layout.md#configini):
//  * FT/Triton keys, as FT's readers want them: model_name, head_num, size_per_head, inter_size,
//    num_layer, vocab_size, start_id, end_id, max_pos_seq_len, weight_data_type, tensor_para_size,
//    layernorm_eps, layernorm_type, activation_type, has_positional_encoding,
//    has_pre_decoder_layernorm, has_post_decoder_layernorm, use_attention_linear_bias,
//    rotary_embedding ([gptj]/[gptneox]), use_gptj_residual ([gptneox], 0/1).
//  * TensorRT-LLM keys (weight.py parse_ft_config): n_embd, n_head, n_layer, n_positions, vocab_size,
//    activation_function, layer_norm_epsilon, do_layer_norm_before, bias, intermediate_size,
//    storage_dtype, multi_query_mode, rotary_pct, rotary_base.
//  * ftx's own keys, so that ftx never guesses what FT leaves implicit:
//      architecture            gpt | gptj | gptneox | bloom | opt | xglm | gpt_bigcode
//      activation              exact ftx activation: Gelu (erf), gelu_tanh, Relu, Silu, SiGLU, GeGLU (erf),
//                              geglu_tanh (GELU tanh, gated), squared_relu
//                              (FT's activation_type cannot tell erf-GELU from tanh-GELU)
//      position_embedding_type learned | rope | alibi | sinusoidal | none
//      position_offset         OPT/XGLM table offset (FT files already drop the offset rows)
//      rotary_dim, rotary_style (interleaved | half_split), rotary_base
//      parallel_residual, shared_input_norm   (0/1)
//      kv_head_num             1 for multi-query attention, < head_num for grouped-query attention
//      hidden_size             the model width, when it is not head_num x size_per_head (Qwen3,
//                              Gemma; written only then; n_embd says it too)
//      normalization           rmsnorm (written only then; absent: layernorm)
//      norm_unit_offset        1: every norm scales by 1 + gamma, the files holding gamma (Gemma;
//                              written only then)
//      has_bias, tied_embeddings, has_lm_head_bias   (0/1)
//      embedding_scale         XGLM sqrt(H) when not folded into wte
//      rotary_scaling_type     linear | llama3 | yarn | longrope (written only when the frequencies are scaled),
//                              with rotary_scaling_factor; for llama3 rotary_scaling_low_freq_factor,
//                              rotary_scaling_high_freq_factor, rotary_scaling_original_max_positions;
//                              for yarn rotary_scaling_original_max_positions, rotary_scaling_beta_fast,
//                              rotary_scaling_beta_slow, rotary_scaling_mscale,
//                              rotary_scaling_mscale_all_dim (0: absent), rotary_scaling_truncate (0/1)
//                              and rotary_scaling_attention_factor (absent: derived; rope_scaling.h);
//                              for longrope rotary_scaling_original_max_positions,
//                              rotary_scaling_short_factor and rotary_scaling_long_factor (rotary_dim/2
//                              comma-separated numbers each) and rotary_scaling_attention_factor
//      qkv_bias                1 when only the QKV projection has a bias (Qwen2; written only then)
//      qk_norm                 1: per-head RMSNorm of Q and K before rotary (Qwen3; written only then)
//      sliding_window          attention window in positions (Mistral; written only when set)
//      attention_scale         the factor of Q·K, when it is not 1/sqrt(size_per_head) (Gemma's
//                              query_pre_attn_scalar^-1/2; written only then)
//      attention_softcap, final_logit_softcap   softcaps of the scores and of the logits, cap·tanh(x/cap)
//                              (Gemma 2; written only when set)
//      rotary_base_local       the rotary base of the layers with a window, unscaled (Gemma 3; written
//                              only when set)
//      layer_window            per-layer sliding windows, one per layer, 0 for a full layer ("4,0";
//                              Gemma 2/3's layer_types; written only when a layer has one)
//      sandwich_norm           1: the attention and FFN outputs are normalised before the residual
//                              add (Gemma 2/3; written only then)
//      weight_only_precision   int4: the layer GEMMs are stored as INT4 files (lib/model/int4_files.h),
//                              int8: as pre-quantised INT8 files (lib/model/int8_files.h), instead
//                              of float ones (written only then; absent or none: floats)
//      int4_group_size         with int4: input rows per group, 0 for one group per GEMM (per channel)
//      moe_top_k, moe_router   experts per token and the router's rule, softmax_topk_renorm |
//                              softmax_topk (with FT's [structure] gpt_with_moe, expert_num,
//                              moe_layers; written only for a mixture of experts; config_ini_moe.cc)
//      moe_inter_size          each expert's FFN width, when it is not inter_size (the dense layers';
//                              Qwen2-MoE, Qwen3-MoE; written only then)
//      moe_shared_expert_inter_size  a shared expert's width (Qwen2-MoE; written only when there is one)
//      moe_ep_size             the ranks whole experts are spread over (convert-hf --moe-ep-size;
//                              written only when above 1, then equal to tensor_para_size)
// Each key set has its reader (config_ini_keys.h): config_ini_ft.cc, config_ini_trtllm.cc and
// config_ini_ftx.cc; from_ini below runs them. Defaults for absent keys follow FT's readers:
// layernorm_eps 1e-6 (FT's default, not the models'), activation Gelu, pre layernorm, positional
// encoding on, post-decoder layernorm on, TP 1, fp32.
#include "lib/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "formats/error.h"
#include "lib/model/config_ini_check.h"
#include "lib/model/config_ini_keys.h"

namespace ftx {

namespace {

using config_ini::lower;

// Shortest text that reads back as the same double (configparser-style, no '%').
std::string fmt_double(double v) {
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string b01(bool b) { return b ? "1" : "0"; }

// N of a config.ini path ".../<N>-gpu/config.ini", else 1.
int64_t tp_of_folder_name(const std::string& ini_path) {
  const size_t slash = ini_path.rfind('/');
  if (slash == std::string::npos || slash == 0) return 1;
  const size_t start = ini_path.rfind('/', slash - 1);
  const std::string dir = ini_path.substr(start == std::string::npos ? 0 : start + 1, slash - (start == std::string::npos ? 0 : start + 1));
  const size_t dash = dir.find("-gpu");
  if (dash == std::string::npos || dash == 0 || dash + 4 != dir.size() || dash > 5 ||
      dir.find_first_not_of("0123456789") != dash)
    return 1;
  return std::stoll(dir.substr(0, dash));
}
std::string bTF(bool b) { return b ? "True" : "False"; }

const char* position_name(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearned: return "learned";
    case PositionEmbedding::kRotary: return "rope";
    case PositionEmbedding::kAlibi: return "alibi";
    case PositionEmbedding::kSinusoidal: return "sinusoidal";
    case PositionEmbedding::kNone: return "none";
  }
  return "learned";
}

// Each activation's spellings: FT's activation_type (activation_types.h; FT has one GELU, the
// tanh approximation, and its GeGLU gates it), HF/TensorRT-LLM's activation_function, and ftx's
// activation key, which keeps erf and tanh apart.
struct ActivationSpelling {
  Activation act;
  const char* ft;
  const char* hf;
  const char* ftx;
};
constexpr ActivationSpelling kActivationSpellings[] = {
    {Activation::kGelu, "Gelu", "gelu", "Gelu"},
    {Activation::kGeluTanh, "Gelu", "gelu_new", "gelu_tanh"},
    {Activation::kRelu, "Relu", "relu", "Relu"},
    {Activation::kSilu, "Silu", "silu", "Silu"},
    {Activation::kSwiGlu, "SiGLU", "swiglu", "SiGLU"},
    {Activation::kGeGlu, "GeGLU", "geglu", "GeGLU"},
    {Activation::kGeGluTanh, "GeGLU", "geglu_tanh", "geglu_tanh"},  // Gemma
    {Activation::kSquaredRelu, "squared-relu" /* not in FT */, "squared-relu", "squared_relu"},
};

const ActivationSpelling& spelling_of(Activation a) {
  for (const ActivationSpelling& s : kActivationSpellings)
    if (s.act == a) return s;
  throw Error("activation (nonlinearity " + std::to_string(static_cast<int>(a.nonlinearity())) +
              (a.is_gated() ? ", gated" : "") + ") has no config.ini spelling");
}

const char* ft_activation_type(Activation a) { return spelling_of(a).ft; }
const char* hf_activation(Activation a) { return spelling_of(a).hf; }

const char* ft_dtype(DType t) {
  switch (t) {
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    default: return "fp32";
  }
}

const char* section_for(FtVariant v) {
  switch (v) {
    case FtVariant::kGptJ: return "gptj";
    case FtVariant::kGptNeoX: return "gptneox";
    default: return "gpt";
  }
}

}  // namespace

const char* ft_variant_name(FtVariant v) {
  switch (v) {
    case FtVariant::kGpt: return "gpt";
    case FtVariant::kGptJ: return "gptj";
    case FtVariant::kGptNeoX: return "gptneox";
    case FtVariant::kBloom: return "bloom";
    case FtVariant::kOpt: return "opt";
    case FtVariant::kXglm: return "xglm";
    case FtVariant::kGptBigCode: return "gpt_bigcode";
  }
  return "gpt";
}

const char* weight_only_precision_name(WeightOnlyPrecision p) {
  return p == WeightOnlyPrecision::kInt4 ? "int4" : p == WeightOnlyPrecision::kInt8 ? "int8" : "none";
}

FtVariant ft_variant_from_name(const std::string& s) {
  std::string l = lower(s);
  if (l == "gpt" || l == "gpt2") return FtVariant::kGpt;
  if (l == "gptj" || l == "gpt-j") return FtVariant::kGptJ;
  if (l == "gptneox" || l == "gpt_neox" || l == "gpt-neox") return FtVariant::kGptNeoX;
  if (l == "bloom") return FtVariant::kBloom;
  if (l == "opt") return FtVariant::kOpt;
  if (l == "xglm") return FtVariant::kXglm;
  if (l == "gpt_bigcode" || l == "gptbigcode") return FtVariant::kGptBigCode;
  throw Error("unknown architecture '" + s + "' (supported: gpt, gptj, gptneox, bloom, opt, xglm, gpt_bigcode)");
}

const char* activation_name(Activation a) { return spelling_of(a).ftx; }

// HF/NeMo "gelu" is the exact erf GELU; gelu_new/gelu_fast/gelu_pytorch_tanh/gelu_tanh the tanh one.
Activation activation_from_name(const std::string& s) {
  std::string l = lower(s);
  if (l == "gelu" || l == "gelu_exact") return Activation::kGelu;
  if (l == "gelu_new" || l == "gelu_fast" || l == "gelu_tanh" || l == "gelu_pytorch_tanh" ||
      l == "fast-gelu" || l == "approx-gelu")
    return Activation::kGeluTanh;
  if (l == "relu") return Activation::kRelu;
  if (l == "silu" || l == "swish") return Activation::kSilu;
  if (l == "swiglu" || l == "siglu" || l == "gated-silu" || l == "fast-swiglu") return Activation::kSwiGlu;
  if (l == "geglu" || l == "gated-gelu" || l == "fast-geglu") return Activation::kGeGlu;
  if (l == "geglu_tanh") return Activation::kGeGluTanh;
  if (l == "squared-relu" || l == "squared_relu" || l == "relu2") return Activation::kSquaredRelu;
  throw Error("unknown activation '" + s + "' (supported: gelu, gelu_new, relu, silu, swiglu, geglu, geglu_tanh, squared-relu)");
}

namespace {

// The variant: ftx's key `architecture`, else the section and FT's model_variant/ALiBi hints.
FtVariant ft_variant_of(const config_ini::Reader& r) {
  if (r.has("architecture")) {
    try {
      return ft_variant_from_name(r.get("architecture"));
    } catch (const Error& e) {
      throw Error(r.origin(), e.what());
    }
  }
  if (r.sec == "gptj") return FtVariant::kGptJ;
  if (r.sec == "gptneox") return FtVariant::kGptNeoX;
  const std::string variant = lower(r.get_or("model_variant", ""));
  if (variant.rfind("bloom", 0) == 0) return FtVariant::kBloom;
  if (variant.rfind("opt", 0) == 0) return FtVariant::kOpt;
  if (r.b_or("use_attention_linear_bias", false)) return FtVariant::kBloom;
  return FtVariant::kGpt;
}

// Each variant's defaults, overridden by the keys read after them.
void ft_variant_defaults(ModelConfig& c) {
  if (c.ft_variant == FtVariant::kGptJ) {
    c.position = PositionEmbedding::kRotary;
    c.rotary_style = RotaryStyle::kInterleaved;
    c.parallel_residual = true;
    c.shared_input_norm = true;
    c.tied_embeddings = false;
    c.has_lm_head_bias = true;
    c.activation = Activation::kGeluTanh;
  } else if (c.ft_variant == FtVariant::kGptNeoX) {
    c.position = PositionEmbedding::kRotary;
    c.rotary_style = RotaryStyle::kHalfSplit;
    c.tied_embeddings = false;
  } else if (c.ft_variant == FtVariant::kBloom) {
    c.position = PositionEmbedding::kAlibi;
    c.has_pre_decoder_layernorm = true;
  }
}

}  // namespace

int64_t PromptLearning::find(const std::string& name_or_id) const {
  for (size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].name == name_or_id) return static_cast<int64_t>(i);
  if (!name_or_id.empty() && name_or_id.find_first_not_of("0123456789") == std::string::npos &&
      name_or_id.size() < 10) {
    const int64_t id = std::stoll(name_or_id);
    if (id < static_cast<int64_t>(tasks.size())) return id;
  }
  return -1;
}

ModelConfig ModelConfig::from_ini(const IniFile& ini) {
  const std::string origin = ini.path();
  std::string sec;
  for (const char* s : {"gpt", "gptj", "gptneox"})
    if (ini.has_section(s)) { sec = s; break; }
  if (sec.empty()) throw Error(origin, "no [gpt], [gptj] or [gptneox] section");
  check_config_ini(ini, sec);  // every key's type and range, and keys that must agree, named with their values
  const config_ini::Reader r{ini, sec};
  ModelConfig c;

  c.ft_variant = ft_variant_of(r);
  ft_variant_defaults(c);

  // One dialect or the other: a folder without head_num but with n_head is TensorRT-LLM's only.
  if (!r.has("head_num") && r.has("n_head")) config_ini::read_trtllm_keys(r, c);
  else config_ini::read_ft_keys(r, c);
  // Both dialects: FT takes the TP size from config.pbtxt; its converters' folder name OUT/<N>-gpu says it too.
  c.tensor_para_size = r.i_or("tensor_para_size", tp_of_folder_name(origin));
  config_ini::read_ftx_keys(r, c);
  config_ini::read_prompt_learning(r, c);
  config_ini::read_moe_keys(r, c);
  return c;
}

IniFile ModelConfig::to_ini() const {
  IniFile ini;
  const std::string s = section_for(ft_variant);
  const int64_t H = hidden();
  const bool has_pos = position == PositionEmbedding::kLearned || position == PositionEmbedding::kSinusoidal;

  // FT / Triton keys.
  ini.set(s, "model_name", model_name);
  ini.set(s, "head_num", std::to_string(head_num));
  ini.set(s, "size_per_head", std::to_string(size_per_head));
  ini.set(s, "inter_size", std::to_string(inter_size));
  ini.set(s, "num_layer", std::to_string(num_layer));
  if (max_pos_seq_len > 0) ini.set(s, "max_pos_seq_len", std::to_string(max_pos_seq_len));
  ini.set(s, "vocab_size", std::to_string(vocab_size));
  ini.set(s, "start_id", std::to_string(start_id));
  ini.set(s, "end_id", std::to_string(end_id));
  ini.set(s, "weight_data_type", ft_dtype(weight_data_type));
  ini.set(s, "tensor_para_size", std::to_string(tensor_para_size));
  // Always written: FT falls back to 1e-6 when it is absent.
  ini.set(s, "layernorm_eps", fmt_double(layernorm_eps));
  if (ft_variant == FtVariant::kGptJ || ft_variant == FtVariant::kGptNeoX) {
    ini.set(s, "rotary_embedding", std::to_string(rotary_dim));
    if (ft_variant == FtVariant::kGptNeoX) ini.set(s, "use_gptj_residual", b01(parallel_residual));
  } else {
    ini.set(s, "layernorm_type", norm == NormPlacement::kPre ? "pre_layernorm" : "post_layernorm");
    ini.set(s, "activation_type", ft_activation_type(activation));
    ini.set(s, "has_positional_encoding", bTF(has_pos));
    ini.set(s, "has_pre_decoder_layernorm", bTF(has_pre_decoder_layernorm));
    ini.set(s, "has_post_decoder_layernorm", bTF(has_post_decoder_layernorm));
    ini.set(s, "use_attention_linear_bias", bTF(position == PositionEmbedding::kAlibi));
  }

  // TensorRT-LLM keys (weight.py parse_ft_config).
  ini.set(s, "n_embd", std::to_string(H));
  ini.set(s, "n_head", std::to_string(head_num));
  ini.set(s, "n_layer", std::to_string(num_layer));
  ini.set(s, "n_positions", std::to_string(max_pos_seq_len));
  ini.set(s, "activation_function", hf_activation(activation));
  ini.set(s, "layer_norm_epsilon", fmt_double(layernorm_eps));
  ini.set(s, "do_layer_norm_before", bTF(norm == NormPlacement::kPre));
  ini.set(s, "bias", bTF(has_bias));
  ini.set(s, "intermediate_size", std::to_string(inter_size));
  ini.set(s, "storage_dtype", dtype_name(weight_data_type));
  ini.set(s, "multi_query_mode", bTF(attention == AttentionKind::kMultiQuery));
  if (position == PositionEmbedding::kRotary) {
    ini.set(s, "rotary_pct", fmt_double(size_per_head ? double(rotary_dim) / double(size_per_head) : 0.0));
    ini.set(s, "rotary_base", fmt_double(rotary_base));
  } else {
    ini.set(s, "rotary_pct", "0.0");
  }

  // ftx keys.
  ini.set(s, "architecture", ft_variant_name(ft_variant));
  ini.set(s, "activation", activation_name(activation));
  ini.set(s, "position_embedding_type", position_name(position));
  if (position_offset) ini.set(s, "position_offset", std::to_string(position_offset));
  if (position == PositionEmbedding::kRotary) {
    ini.set(s, "rotary_dim", std::to_string(rotary_dim));
    ini.set(s, "rotary_style", rotary_style == RotaryStyle::kInterleaved ? "interleaved" : "half_split");
    if (rope_scaling.type != RopeScalingType::kNone) {
      ini.set(s, "rotary_scaling_type", rope_scaling_name(rope_scaling.type));
      ini.set(s, "rotary_scaling_factor", fmt_double(rope_scaling.factor));
      if (rope_scaling.type == RopeScalingType::kLlama3) {
        ini.set(s, "rotary_scaling_low_freq_factor", fmt_double(rope_scaling.low_freq_factor));
        ini.set(s, "rotary_scaling_high_freq_factor", fmt_double(rope_scaling.high_freq_factor));
        ini.set(s, "rotary_scaling_original_max_positions", std::to_string(rope_scaling.original_max_position_embeddings));
      }
      if (rope_scaling.type == RopeScalingType::kYarn) {
        ini.set(s, "rotary_scaling_original_max_positions", std::to_string(rope_scaling.original_max_position_embeddings));
        ini.set(s, "rotary_scaling_beta_fast", fmt_double(rope_scaling.beta_fast));
        ini.set(s, "rotary_scaling_beta_slow", fmt_double(rope_scaling.beta_slow));
        ini.set(s, "rotary_scaling_mscale", fmt_double(rope_scaling.mscale));
        ini.set(s, "rotary_scaling_mscale_all_dim", fmt_double(rope_scaling.mscale_all_dim));
        ini.set(s, "rotary_scaling_truncate", b01(rope_scaling.truncate));
        if (rope_scaling.attention_factor)
          ini.set(s, "rotary_scaling_attention_factor", fmt_double(*rope_scaling.attention_factor));
      }
      if (rope_scaling.type == RopeScalingType::kLongrope) {
        auto list = [](const std::vector<double>& v) {
          std::string t;
          for (double x : v) t += (t.empty() ? "" : ",") + fmt_double(x);
          return t;
        };
        ini.set(s, "rotary_scaling_original_max_positions", std::to_string(rope_scaling.original_max_position_embeddings));
        ini.set(s, "rotary_scaling_short_factor", list(rope_scaling.short_factor));
        ini.set(s, "rotary_scaling_long_factor", list(rope_scaling.long_factor));
        if (rope_scaling.attention_factor)
          ini.set(s, "rotary_scaling_attention_factor", fmt_double(*rope_scaling.attention_factor));
      }
    }
  }
  ini.set(s, "parallel_residual", b01(parallel_residual));
  ini.set(s, "shared_input_norm", b01(shared_input_norm));
  ini.set(s, "kv_head_num", std::to_string(kv_head_num > 0 ? kv_head_num : head_num));
  if (hidden() != q_width()) ini.set(s, "hidden_size", std::to_string(hidden()));
  if (normalization == Normalization::kRmsNorm) ini.set(s, "normalization", "rmsnorm");
  if (norm_unit_offset) ini.set(s, "norm_unit_offset", "1");
  ini.set(s, "has_bias", b01(has_bias));
  if (qkv_bias && !has_bias) ini.set(s, "qkv_bias", "1");
  if (qk_norm) ini.set(s, "qk_norm", "1");
  if (sliding_window > 0) ini.set(s, "sliding_window", std::to_string(sliding_window));
  if (std::any_of(layer_window.begin(), layer_window.end(), [](int64_t w) { return w > 0; })) {
    std::string list;
    for (int64_t w : layer_window) list += (list.empty() ? "" : ",") + std::to_string(w);
    ini.set(s, "layer_window", list);
  }
  if (rotary_base_local > 0) ini.set(s, "rotary_base_local", fmt_double(rotary_base_local));
  if (sandwich_norm) ini.set(s, "sandwich_norm", "1");
  if (weight_only_precision == WeightOnlyPrecision::kInt4) {
    ini.set(s, "weight_only_precision", weight_only_precision_name(weight_only_precision));
    ini.set(s, "int4_group_size", std::to_string(int4_group_size));
  }
  if (weight_only_precision == WeightOnlyPrecision::kInt8)
    ini.set(s, "weight_only_precision", weight_only_precision_name(weight_only_precision));
  if (attention_scale > 0) ini.set(s, "attention_scale", fmt_double(attention_scale));
  if (attention_softcap > 0) ini.set(s, "attention_softcap", fmt_double(attention_softcap));
  if (final_logit_softcap > 0) ini.set(s, "final_logit_softcap", fmt_double(final_logit_softcap));
  ini.set(s, "tied_embeddings", b01(tied_embeddings));
  ini.set(s, "has_lm_head_bias", b01(has_lm_head_bias));
  if (embedding_scale != 1.0) ini.set(s, "embedding_scale", fmt_double(embedding_scale));
  if (is_moe()) {  // FT's [structure] section, moe_layers spelled as FT's converter writes it
    std::string list;
    for (int64_t l : moe_layers) list += (list.empty() ? "" : ", ") + std::to_string(l);
    ini.set("structure", "gpt_with_moe", "1");
    ini.set("structure", "expert_num", std::to_string(expert_num));
    ini.set("structure", "moe_layers", "[" + list + "]");
    ini.set(s, "moe_top_k", std::to_string(moe_top_k));
    ini.set(s, "moe_router", moe_routing == MoeRouting::kSoftmaxTopK ? "softmax_topk" : "softmax_topk_renorm");
    if (moe_inter_size > 0 && moe_inter_size != inter_size) ini.set(s, "moe_inter_size", std::to_string(moe_inter_size));
    if (moe_shared_inter_size > 0) ini.set(s, "moe_shared_expert_inter_size", std::to_string(moe_shared_inter_size));
    if (moe_ep_size > 1) ini.set(s, "moe_ep_size", std::to_string(moe_ep_size));
  }
  if (prompt.any()) {
    ini.set(s, "num_tasks", std::to_string(prompt.tasks.size()));
    ini.set(s, "prompt_learning_start_id", std::to_string(prompt.start_id));
    ini.set(s, "prompt_learning_type", std::to_string(static_cast<int>(prompt.type)));
    for (size_t k = 0; k < prompt.tasks.size(); ++k) {
      const std::string t = "task_" + std::to_string(k);
      ini.set(t, "task_name", prompt.tasks[k].name);
      ini.set(t, "prompt_length", std::to_string(prompt.tasks[k].length));
    }
  }
  return ini;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return is_moe() && std::binary_search(moe_layers.begin(), moe_layers.end(), layer);
}

int64_t ModelConfig::kv_heads_per_rank(int64_t tp) const {
  const int64_t kv = kv_head_num > 0 ? kv_head_num : head_num;
  return kv == 1 ? 1 : kv / tp;
}

void ModelConfig::validate(int64_t tp, const std::string& origin) const {
  auto positive = [&](const char* key, int64_t v) {
    FTX_CHECK(v > 0, origin, std::string(key) + " must be positive, got " + std::to_string(v));
  };
  positive("head_num", head_num);
  positive("size_per_head", size_per_head);
  positive("inter_size", inter_size);
  positive("num_layer", num_layer);
  positive("vocab_size", vocab_size);
  positive("tensor parallel size", tp);
  const int64_t kMaxDim = kMaxModelDim;
  for (auto [key, v] : {std::pair<const char*, int64_t>{"head_num", head_num}, {"size_per_head", size_per_head},
                        {"inter_size", inter_size}, {"num_layer", num_layer}, {"vocab_size", vocab_size},
                        {"max_pos_seq_len", max_pos_seq_len}})
    FTX_CHECK(v <= kMaxDim, origin, std::string(key) + " = " + std::to_string(v) + " is implausibly large (limit " +
                                        std::to_string(kMaxDim) + ")");
  FTX_CHECK(q_width() <= kMaxDim, origin,
            "head_num x size_per_head = " + std::to_string(q_width()) + " is implausibly large");
  FTX_CHECK(hidden_size >= 0 && hidden_size <= kMaxDim, origin,
            "hidden_size = " + std::to_string(hidden_size) + " is out of range (limit " + std::to_string(kMaxDim) + ")");
  FTX_CHECK(head_num % tp == 0, origin,
            "head_num " + std::to_string(head_num) + " is not divisible by tensor parallel size " + std::to_string(tp));
  FTX_CHECK(inter_size % tp == 0, origin,
            "inter_size " + std::to_string(inter_size) + " is not divisible by tensor parallel size " +
                std::to_string(tp));
  const int64_t kv = kv_head_num > 0 ? kv_head_num : head_num;
  FTX_CHECK(kv <= head_num && head_num % kv == 0, origin,
            "kv_head_num " + std::to_string(kv) + " does not divide head_num " + std::to_string(head_num));
  FTX_CHECK(kv == 1 || kv % tp == 0, origin,
            "kv_head_num " + std::to_string(kv) + " is not divisible by tensor parallel size " + std::to_string(tp) +
                " (grouped-query attention splits the key/value heads over the ranks)");
  if (position == PositionEmbedding::kLearned || position == PositionEmbedding::kSinusoidal)
    positive("max_pos_seq_len", max_pos_seq_len);
  if (position == PositionEmbedding::kRotary) {
    FTX_CHECK(rotary_dim > 0 && rotary_dim <= size_per_head && rotary_dim % 2 == 0, origin,
              "rotary_dim " + std::to_string(rotary_dim) + " must be even and in (0, size_per_head " +
                  std::to_string(size_per_head) + "]");
  }
  if (position == PositionEmbedding::kRotary) check_rope_scaling(rope_scaling, origin);
  FTX_CHECK(sliding_window >= 0, origin, "sliding_window must not be negative, got " + std::to_string(sliding_window));
  FTX_CHECK(attention_scale >= 0 && std::isfinite(attention_scale), origin,
            "attention_scale must be a positive number, got " + fmt_double(attention_scale));
  for (auto [key, cap] : {std::pair<const char*, double>{"attention_softcap", attention_softcap},
                          {"final_logit_softcap", final_logit_softcap}})
    FTX_CHECK(cap >= 0 && std::isfinite(cap), origin, std::string(key) + " must be a positive number, got " + fmt_double(cap));
  FTX_CHECK(layer_window.empty() || static_cast<int64_t>(layer_window.size()) == num_layer, origin,
            "layer_window has " + std::to_string(layer_window.size()) + " entries for " + std::to_string(num_layer) +
                " layers");
  for (int64_t w : layer_window)
    FTX_CHECK(w >= 0, origin, "layer_window must not be negative, got " + std::to_string(w));
  FTX_CHECK(rotary_base_local >= 0 && std::isfinite(rotary_base_local), origin,
            "rotary_base_local must be a positive number, got " + fmt_double(rotary_base_local));
  FTX_CHECK(rotary_base_local == 0 || std::any_of(layer_window.begin(), layer_window.end(), [](int64_t w) { return w > 0; }),
            origin, "rotary_base_local = " + fmt_double(rotary_base_local) +
                        " without a layer that has a window (layer_window): no layer would use it");
  FTX_CHECK(rotary_base_local == 0 || position == PositionEmbedding::kRotary, origin,
            "rotary_base_local is set for a model without rotary embeddings");
  FTX_CHECK(!sandwich_norm || (norm == NormPlacement::kPre && !parallel_residual), origin,
            "sandwich_norm needs a pre-norm model with sequential residuals");
  if (is_moe()) {
    FTX_CHECK(!moe_layers.empty() && moe_layers.front() >= 0 && moe_layers.back() < num_layer &&
                  std::is_sorted(moe_layers.begin(), moe_layers.end()) &&
                  std::adjacent_find(moe_layers.begin(), moe_layers.end()) == moe_layers.end(),
              origin, "moe_layers must list layers of [0, " + std::to_string(num_layer) + ") once each, ascending");
    FTX_CHECK(moe_top_k >= 1 && moe_top_k <= expert_num, origin,
              "moe_top_k = " + std::to_string(moe_top_k) + " must be in [1, expert_num = " +
                  std::to_string(expert_num) + "]");
    // FT's GPT-MoE has bias files for a plain FFN's experts (Megatron-DeepSpeed's); none for a gate.
    FTX_CHECK(!has_bias || !activation.is_gated(), origin,
              "has_bias with gated experts (expert_num = " + std::to_string(expert_num) +
                  "): FT's GPT-MoE layout has no file for an expert's gate bias");
    FTX_CHECK(!has_bias || moe_shared_inter_size == 0, origin,
              "has_bias with a shared expert (moe_shared_expert_inter_size = " + std::to_string(moe_shared_inter_size) +
                  "): no layout has a file for the shared expert's biases");
    const std::pair<const char*, int64_t> widths[] = {{"moe_inter_size", expert_inter()},
                                                      {"moe_shared_expert_inter_size", moe_shared_inter_size}};
    for (const auto& [key, v] : widths)
      FTX_CHECK(v >= 0 && v % tp == 0, origin,
                std::string(key) + " " + std::to_string(v) + " is not divisible by tensor parallel size " +
                    std::to_string(tp));
    FTX_CHECK(moe_ep_size == 1 || (moe_ep_size == tp && expert_num % moe_ep_size == 0), origin,
              "moe_ep_size = " + std::to_string(moe_ep_size) + " with expert_num = " + std::to_string(expert_num) +
                  " at tensor parallel size " + std::to_string(tp) +
                  ": whole experts need moe_ep_size equal to the tensor parallel size and dividing expert_num");
    FTX_CHECK(!has_bias || moe_ep_size == 1, origin,
              "has_bias with moe_ep_size = " + std::to_string(moe_ep_size) +
                  ": FT GPT-MoE's expert biases are laid out for sliced experts only");
  }
  FTX_CHECK(layernorm_eps > 0 && std::isfinite(layernorm_eps), origin,
            "layernorm_eps must be a positive number, got " + fmt_double(layernorm_eps));
}

}  // namespace ftx
