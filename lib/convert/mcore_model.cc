#include "lib/convert/mcore_model.h"

#include <cmath>

#include "formats/error.h"
#include "lib/convert/megatron_files.h"
#include "lib/convert/yaml_fields.h"

namespace ftx {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Settings, of Megatron-LM's args and NeMo's yaml alike, that change the model in a way ftx cannot
// run; a set one is refused.
struct Refused {
  const char* key;
  const char* what;
};
const Refused kRefused[] = {
    {"multi_latent_attention", "multi-latent attention"},
    // MoE options whose layer ftx's engine does not compute.
    {"moe_shared_expert_intermediate_size", "shared experts"},
    {"moe_router_topk_scaling_factor", "a scaled router (top-k scaling factor)"},
    {"moe_router_num_groups", "group-limited routing"},
    {"moe_router_group_topk", "group-limited routing"},
    {"moe_router_enable_expert_bias", "a router with expert biases"},
    {"moe_expert_capacity_factor", "token dropping (an expert capacity factor)"},
    {"moe_apply_probs_on_input", "router probabilities applied to the experts' input"},
    {"moe_use_legacy_grouped_gemm", "the legacy GroupedMLP (weight1/weight2)"},
    {"virtual_pipeline_model_parallel_size", "virtual pipeline parallelism"},
    {"num_layers_per_virtual_pipeline_stage", "virtual pipeline parallelism"},
    {"qk_layernorm", "QK layernorm"},
    {"mtp_num_layers", "multi-token prediction layers"},
    {"seq_len_interpolation_factor", "rotary sequence-length interpolation"},
    {"use_rope_scaling", "rotary scaling"},
    {"experimental_attention_variant", "an experimental attention variant"},
};

// kRefused in Megatron-LM's arguments.
void refuse_megatron(const ValuePtr& args, const std::string& origin) {
  auto set = [&](const char* key) {
    ValuePtr v = megatron_arg(args, key);
    if (!v || v->kind == Value::Kind::kNone) return false;
    if (v->kind == Value::Kind::kBool) return v->b;
    if (v->kind == Value::Kind::kInt) return v->i != 0;
    return v->kind != Value::Kind::kString || !v->str.empty();
  };
  for (const auto& r : kRefused)
    if (set(r.key))
      throw Error(origin, std::string(r.what) + " is not supported (args." + r.key + " = " +
                              megatron_arg(args, r.key)->repr(40) + ")");
}

void refuse_nemo(const YAML::Node& y, const std::string& origin) {
  for (const auto& r : kRefused) {
    const YAML::Node v = y[r.key];
    if (!v || v.IsNull()) continue;
    const std::string s = v.IsScalar() ? v.as<std::string>("") : "set";
    const std::string l = lower(s);
    if (l.empty() || l == "false" || l == "0" || l == "null" || l == "none") continue;
    throw Error(origin, std::string(r.what) + " is not supported (" + r.key + ": " + s + ")");
  }
}

// The MoE settings read the same way from Megatron-LM's args and NeMo's yaml (the same names but
// num_experts / num_moe_experts); `text` gives a set value's spelling for the error.
struct MoeSettings {
  int64_t experts = 0, topk = 2, ffn_hidden = 0, ep = 1, etp = 0;
  bool pre_softmax = false;
  std::string score = "softmax", balancing = "aux_loss", layer_freq = "1";
};

void apply_moe(const MoeSettings& m, const char* experts_key, McoreArgs& a, const std::string& origin) {
  if (m.experts <= 0) return;
  const std::string p = experts_key;
  FTX_CHECK(m.experts <= (1 << 16), origin, p + " = " + std::to_string(m.experts) + " is not a number of experts ftx runs");
  FTX_CHECK(m.topk >= 1 && m.topk <= m.experts, origin,
            "moe_router_topk = " + std::to_string(m.topk) + " is not in [1, " + p + " = " + std::to_string(m.experts) + "]");
  FTX_CHECK(m.score == "softmax", origin,
            "moe_router_score_function = " + m.score + " is not supported (a softmax router only)");
  FTX_CHECK(m.balancing != "sinkhorn", origin,
            "moe_router_load_balancing_type = sinkhorn is not supported (its router is not a softmax top-k)");
  // Every layer a layer of experts: ftx's FT layout has one FFN size, the experts'.
  FTX_CHECK(m.layer_freq == "1", origin,
            "moe_layer_freq = " + m.layer_freq + " is not supported (only every layer with experts)");
  FTX_CHECK(m.etp == 0 || m.etp == a.tp, origin,
            "expert_tensor_parallel_size = " + std::to_string(m.etp) + " differs from tensor_model_parallel_size = " +
                std::to_string(a.tp) + " (not supported)");
  FTX_CHECK(m.ep >= 1 && m.experts % m.ep == 0, origin,
            "expert_model_parallel_size = " + std::to_string(m.ep) + " does not divide " + p + " = " +
                std::to_string(m.experts));
  FTX_CHECK(!a.bias, origin, "experts with biases are not supported (" + p + " = " + std::to_string(m.experts) +
                                 " with linear biases): Megatron Core expert biases are not converted yet");
  a.experts = m.experts;
  a.moe_topk = m.topk;
  a.moe_pre_softmax = m.pre_softmax;
  a.moe_ffn_hidden = m.ffn_hidden > 0 ? m.ffn_hidden : a.ffn_hidden;
  a.ep = m.ep;
}

void check_sizes(const McoreArgs& a, const std::string& origin) {
  FTX_CHECK(a.num_layers > 0 && a.hidden > 0 && a.heads > 0 && a.ffn_hidden > 0, origin,
            "num_layers, hidden_size, ffn_hidden_size and num_attention_heads must be positive");
  FTX_CHECK(a.hidden % a.heads == 0, origin,
            "hidden size " + std::to_string(a.hidden) + " is not a multiple of the head count " + std::to_string(a.heads));
  FTX_CHECK(a.query_groups > 0 && a.heads % a.query_groups == 0, origin,
            "num_query_groups " + std::to_string(a.query_groups) + " does not divide num_attention_heads " +
                std::to_string(a.heads));
  FTX_CHECK(a.tp > 0 && a.pp > 0 && a.query_groups % a.tp == 0, origin,
            "num_query_groups " + std::to_string(a.query_groups) + " is not divisible by the tensor parallel size " +
                std::to_string(a.tp));
  FTX_CHECK(a.num_layers % a.pp == 0, origin, "num_layers " + std::to_string(a.num_layers) +
                                                  " is not divisible by the pipeline size " + std::to_string(a.pp));
  FTX_CHECK(a.rotary_percent > 0 && a.rotary_percent <= 1, origin,
            "rotary_percent " + std::to_string(a.rotary_percent) + " is not in (0, 1]");
}

}  // namespace

McoreArgs mcore_args_from_megatron(const ValuePtr& args, const std::string& origin) {
  FTX_CHECK(args && args->is_dict(), origin, "has no Megatron-LM args (a Megatron Core checkpoint carries them)");
  refuse_megatron(args, origin);
  McoreArgs a;
  a.num_layers = megatron_arg_int(args, "num_layers", 0);
  a.hidden = megatron_arg_int(args, "hidden_size", 0);
  a.heads = megatron_arg_int(args, "num_attention_heads", 0);
  a.ffn_hidden = megatron_arg_int(args, "ffn_hidden_size", 4 * a.hidden);
  a.query_groups = megatron_arg_bool(args, "group_query_attention", false)
                       ? megatron_arg_int(args, "num_query_groups", a.heads)
                       : a.heads;
  a.max_position_embeddings = megatron_arg_int(args, "max_position_embeddings", 0);
  a.padded_vocab = megatron_arg_int(args, "padded_vocab_size", 0);
  a.tp = megatron_arg_int(args, "tensor_model_parallel_size", 1);
  a.pp = megatron_arg_int(args, "pipeline_model_parallel_size", 1);
  const int64_t kv_channels = megatron_arg_int(args, "kv_channels", 0);
  FTX_CHECK(kv_channels == 0 || a.heads == 0 || kv_channels * a.heads == a.hidden, origin,
            "kv_channels " + std::to_string(kv_channels) + " is not hidden_size / num_attention_heads (not supported)");
  a.position = megatron_arg_str(args, "position_embedding_type", "learned_absolute");
  if (megatron_arg_bool(args, "use_rotary_position_embeddings", false)) a.position = "rope";
  FTX_CHECK(a.position == "learned_absolute" || a.position == "rope" || a.position == "none", origin,
            "position_embedding_type '" + a.position + "' is not supported (learned_absolute, rope, none)");
  FTX_CHECK(!megatron_arg_bool(args, "rotary_interleaved", false), origin,
            "interleaved rotary embeddings are not supported (args.rotary_interleaved = True)");
  a.rotary_percent = megatron_arg_double(args, "rotary_percent", 1.0);
  a.rotary_base = megatron_arg_double(args, "rotary_base", 10000.0);
  const std::string norm = megatron_arg_str(args, "normalization", "LayerNorm");
  FTX_CHECK(norm == "LayerNorm" || norm == "RMSNorm", origin,
            "normalization '" + norm + "' is not supported (LayerNorm, RMSNorm)");
  a.rmsnorm = norm == "RMSNorm";
  a.layernorm1p = megatron_arg_bool(args, "apply_layernorm_1p", false);
  FTX_CHECK(!(a.rmsnorm && a.layernorm1p), origin, "apply_layernorm_1p with RMSNorm is not supported");
  a.eps = megatron_arg_double(args, "norm_epsilon", megatron_arg_double(args, "layernorm_epsilon", 1e-5));
  a.bias = megatron_arg_bool(args, "add_bias_linear", true);
  FTX_CHECK(a.bias || !megatron_arg_bool(args, "add_qkv_bias", false), origin,
            "a QKV bias without the other linear biases is not supported (args.add_qkv_bias = True)");
  a.tied = !megatron_arg_bool(args, "untie_embeddings_and_output_weights", false);
  a.tied_because = "the checkpoint's args have untie_embeddings_and_output_weights False";
  a.untie_hint = "set args.untie_embeddings_and_output_weights = True in the checkpoint (Megatron-LM's "
                 "--untie-embeddings-and-output-weights)";
  const bool swiglu = megatron_arg_bool(args, "swiglu", false);
  const bool squared = megatron_arg_bool(args, "squared_relu", false);
  FTX_CHECK(!(swiglu && squared), origin, "both swiglu and squared_relu are set");
  a.activation = swiglu ? Activation::kSwiGlu
                 : squared ? Activation::kSquaredRelu
                 : megatron_arg_bool(args, "openai_gelu", false) ? Activation::kGeluTanh
                                                                 : Activation::kGelu;
  MoeSettings m;
  m.experts = megatron_arg_int(args, "num_experts", 0);
  m.topk = megatron_arg_int(args, "moe_router_topk", 2);
  m.pre_softmax = megatron_arg_bool(args, "moe_router_pre_softmax", false);
  m.ffn_hidden = megatron_arg_int(args, "moe_ffn_hidden_size", 0);
  m.ep = megatron_arg_int(args, "expert_model_parallel_size", 1);
  m.etp = megatron_arg_int(args, "expert_tensor_parallel_size", 0);
  m.score = megatron_arg_str(args, "moe_router_score_function", "softmax");
  m.balancing = megatron_arg_str(args, "moe_router_load_balancing_type", "aux_loss");
  if (ValuePtr f = megatron_arg(args, "moe_layer_freq"); f && f->kind != Value::Kind::kNone)
    m.layer_freq = f->kind == Value::Kind::kInt ? std::to_string(f->i) : f->repr(40);
  apply_moe(m, "args.num_experts", a, origin);
  check_sizes(a, origin);
  return a;
}

McoreArgs mcore_args_from_nemo(const YAML::Node& y, const std::string& origin) {
  refuse_nemo(y, origin);
  McoreArgs a;
  a.num_layers = yaml_int(y, "num_layers", origin);
  a.hidden = yaml_int(y, "hidden_size", origin);
  a.heads = yaml_int(y, "num_attention_heads", origin);
  a.ffn_hidden = yaml_int(y, "ffn_hidden_size", origin);
  a.query_groups = yaml_or<int64_t>(y, "num_query_groups", a.heads);
  a.max_position_embeddings = yaml_or<int64_t>(y, "max_position_embeddings", 0);
  a.tp = yaml_or<int64_t>(y, "tensor_model_parallel_size", 1);
  a.pp = yaml_or<int64_t>(y, "pipeline_model_parallel_size", 1);
  const int64_t kv_channels = yaml_or<int64_t>(y, "kv_channels", 0);
  FTX_CHECK(kv_channels == 0 || kv_channels * a.heads == a.hidden, origin,
            "kv_channels " + std::to_string(kv_channels) + " is not hidden_size / num_attention_heads (not supported)");
  a.position = yaml_or<std::string>(y, "position_embedding_type", "learned_absolute");
  FTX_CHECK(a.position == "learned_absolute" || a.position == "rope" || a.position == "none", origin,
            "position_embedding_type '" + a.position + "' is not supported (learned_absolute, rope, none)");
  a.rotary_percent = yaml_or<double>(y, "rotary_percentage", 1.0);
  a.rotary_base = yaml_or<double>(y, "rotary_base", 10000.0);
  const std::string norm = lower(yaml_or<std::string>(y, "normalization", "layernorm"));
  FTX_CHECK(norm == "layernorm" || norm == "layernorm1p" || norm == "rmsnorm", origin,
            "normalization '" + norm + "' is not supported (layernorm, layernorm1p, rmsnorm)");
  a.rmsnorm = norm == "rmsnorm";
  a.layernorm1p = norm == "layernorm1p" || yaml_or<bool>(y, "layernorm_zero_centered_gamma", false);
  a.eps = yaml_or<double>(y, "layernorm_epsilon", 1e-5);
  a.bias = yaml_or<bool>(y, "bias", true);
  a.tied = yaml_or<bool>(y, "share_embeddings_and_output_weights", true);
  a.tied_because = y["share_embeddings_and_output_weights"]
                       ? "model_config.yaml says share_embeddings_and_output_weights: true"
                       : "model_config.yaml has no share_embeddings_and_output_weights (NeMo's default is true)";
  a.untie_hint = "set share_embeddings_and_output_weights: false in model_config.yaml";
  const std::string act = yaml_or<std::string>(y, "activation", "gelu");
  try {
    a.activation = activation_from_name(act);
  } catch (const Error& e) {
    throw Error(origin, e.what());
  }
  MoeSettings m;
  m.experts = yaml_or<int64_t>(y, "num_moe_experts", 0);
  m.topk = yaml_or<int64_t>(y, "moe_router_topk", 2);
  m.pre_softmax = yaml_or<bool>(y, "moe_router_pre_softmax", false);
  m.ffn_hidden = yaml_or<int64_t>(y, "moe_ffn_hidden_size", 0);
  m.ep = yaml_or<int64_t>(y, "expert_model_parallel_size", 1);
  m.etp = yaml_or<int64_t>(y, "expert_tensor_parallel_size", 0);
  m.score = yaml_or<std::string>(y, "moe_router_score_function", "softmax");
  m.balancing = yaml_or<std::string>(y, "moe_router_load_balancing_type", "aux_loss");
  if (y["moe_layer_freq"] && !y["moe_layer_freq"].IsNull())
    m.layer_freq = y["moe_layer_freq"].IsScalar() ? y["moe_layer_freq"].as<std::string>() : "a list";
  apply_moe(m, "num_moe_experts", a, origin);
  check_sizes(a, origin);
  return a;
}

ModelConfig mcore_model_config(const McoreArgs& a, int64_t vocab_rows, const std::string& origin) {
  ModelConfig c;
  c.ft_variant = FtVariant::kGpt;
  c.model_name = "gpt";
  c.head_num = a.heads;
  c.size_per_head = a.hidden / a.heads;
  c.kv_head_num = a.query_groups;
  c.attention = a.query_groups == 1 && a.heads > 1 ? AttentionKind::kMultiQuery : AttentionKind::kMultiHead;
  c.inter_size = a.ffn_hidden;
  c.num_layer = a.num_layers;
  c.vocab_size = a.padded_vocab > 0 ? a.padded_vocab : vocab_rows;
  FTX_CHECK(c.vocab_size == vocab_rows, origin,
            "padded_vocab_size " + std::to_string(a.padded_vocab) + " but the embedding table has " +
                std::to_string(vocab_rows) + " rows");
  c.layernorm_eps = a.eps;
  c.activation = a.activation;
  c.normalization = a.rmsnorm ? Normalization::kRmsNorm : Normalization::kLayerNorm;
  c.has_bias = a.bias;
  c.tied_embeddings = a.tied;
  if (a.experts > 0) {
    c.expert_num = a.experts;
    for (int64_t l = 0; l < a.num_layers; ++l) c.moe_layers.push_back(l);
    c.moe_top_k = a.moe_topk;
    c.moe_routing = a.moe_pre_softmax ? MoeRouting::kSoftmaxTopK : MoeRouting::kSoftmaxTopKRenorm;
    c.inter_size = a.moe_ffn_hidden;  // every layer's FFN is its experts'
  }
  if (a.position == "rope") {
    c.position = PositionEmbedding::kRotary;
    c.rotary_style = RotaryStyle::kHalfSplit;
    // Megatron Core: int(kv_channels * rotary_percent) rotary dims per head.
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.size_per_head) * a.rotary_percent);
    c.rotary_base = a.rotary_base;
    c.max_pos_seq_len = a.max_position_embeddings;
  } else if (a.position == "none") {
    c.position = PositionEmbedding::kNone;
  } else {
    c.position = PositionEmbedding::kLearned;
    c.max_pos_seq_len = a.max_position_embeddings;
  }
  return c;
}

JobContext mcore_job_context(const McoreArgs& a, int64_t shards) {
  JobContext ctx;
  ctx.heads_per_shard = a.heads / shards;
  ctx.head_dim = a.hidden / a.heads;
  ctx.hidden = a.hidden;
  ctx.qkv_groups = a.query_groups / shards;
  ctx.single_kv_head = a.query_groups == 1;
  ctx.gated = a.activation.is_gated();
  ctx.layernorm1p = a.layernorm1p;
  return ctx;
}

}  // namespace ftx
