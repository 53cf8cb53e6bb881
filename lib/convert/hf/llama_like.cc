// HuggingFace LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and Gemma2ForCausalLM
// -> the FT layout of a rope/gated FFN/RMSNorm/GQA model (section [gpt], as convert-megatron writes Megatron Core's):
//  * q_proj [n·d, H], k_proj and v_proj [g·d, H] -> query_key_value [H, (n + 2g)·d / T] per rank,
//    [Q | K | V] of the rank's heads; with T > g > 1 each K/V head is copied to the T/g ranks
//    whose query heads use it (TensorRT-LLM's layout), so the folder has kv_head_num = T;
//  * gate_proj (activated: silu; Gemma: the tanh GELU) -> mlp.dense_h_to_4h, up_proj -> mlp.dense_h_to_4h.gate,
//    down_proj -> mlp.dense_4h_to_h, as FT's gated FFN computes act(x·W) · (x·W_gate);
//  * RMSNorm weights -> the layernorm files without biases (normalization = rmsnorm);
//  * rotary on half-split pairs (transformers' rotate_half), rope_theta and rope scaling (linear,
//    llama3; yarn where the family computes it) read from rope_parameters (5.x) or the top level /
//    rope_scaling (4.x);
//  * Qwen3's per-head q_norm / k_norm -> attention.{q,k}_layernorm.weight, whole on every rank;
//  * Gemma's four norms a layer: its post_attention_layernorm (on the attention's output) ->
//    attention.post_layernorm, pre_feedforward_layernorm -> post_attention_layernorm (the FFN's
//    input norm, as Llama's post_attention_layernorm), post_feedforward_layernorm -> mlp.post_layernorm.
#include "lib/convert/hf/llama_like.h"

#include <algorithm>
#include <memory>

#include "formats/error.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

// Source names after `model.` is stripped (lm_head.weight has no prefix). q/k/v are parts the
// driver gathers and fuse_qkv joins (qkv_job).
const ArchLayout& llama_layout() {
  static const ArchLayout l{
      "hf-llama",
      {
          {R"(embed_tokens\.weight)", "model.wte", Role::kReplicated, false},
          {R"(lm_head\.weight)", "model.lm_head.weight", Role::kReplicated, false},
          {R"(norm\.weight)", "model.final_layernorm.weight", Role::kReplicated, false},
          {kL + R"(input_layernorm\.weight)", kFL + "input_layernorm.weight", Role::kReplicated, false},
          {kL + R"(post_attention_layernorm\.weight)", kFL + "post_attention_layernorm.weight", Role::kReplicated, false},
          {kL + R"(self_attn\.q_proj\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true, 0},
          {kL + R"(self_attn\.k_proj\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true, 1},
          {kL + R"(self_attn\.v_proj\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true, 2},
          {kL + R"(self_attn\.o_proj\.weight)", kFL + "attention.dense.weight", Role::kRow, true},
          {kL + R"(self_attn\.o_proj\.bias)", kFL + "attention.dense.bias", Role::kReplicated, false},
          {kL + R"(mlp\.gate_proj\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumn, true},
          {kL + R"(mlp\.up_proj\.(weight|bias))", kFL + "mlp.dense_h_to_4h.gate.$2", Role::kColumn, true},
          {kL + R"(mlp\.down_proj\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, true},
          {kL + R"(mlp\.down_proj\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
      },
      {R"(.*\.inv_freq)"}};
  return l;
}

// Qwen3's: llama's plus the per-head q/k norms, one gamma for all heads, on every rank.
const ArchLayout& qk_norm_layout() {
  static const ArchLayout l = [] {
    ArchLayout a = llama_layout();
    a.name = "hf-llama-qk-norm";
    a.rules.push_back({kL + R"(self_attn\.q_norm\.weight)", kFL + "attention.q_layernorm.weight", Role::kReplicated, false});
    a.rules.push_back({kL + R"(self_attn\.k_norm\.weight)", kFL + "attention.k_layernorm.weight", Role::kReplicated, false});
    return a;
  }();
  return l;
}

// Gemma's: llama's norms renamed (its post_attention_layernorm is the attention output's norm) and
// the FFN's two; with q/k norms when `qk` (Gemma 3).
const ArchLayout& sandwich_layout(bool qk) {
  auto make = [](const ArchLayout& base, const char* name) {
    ArchLayout a = base;
    a.name = name;
    for (LayoutRule& r : a.rules)
      if (r.ft_name == kFL + "post_attention_layernorm.weight") r.ft_name = kFL + "attention.post_layernorm.weight";
    a.rules.push_back({kL + R"(pre_feedforward_layernorm\.weight)", kFL + "post_attention_layernorm.weight", Role::kReplicated, false});
    a.rules.push_back({kL + R"(post_feedforward_layernorm\.weight)", kFL + "mlp.post_layernorm.weight", Role::kReplicated, false});
    return a;
  };
  static const ArchLayout plain = make(llama_layout(), "hf-llama-sandwich");
  static const ArchLayout with_qk = make(qk_norm_layout(), "hf-llama-qk-norm-sandwich");
  return qk ? with_qk : plain;
}

void read(const LlamaLike& spec, HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  const std::string& type = spec.family.model_type;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kGpt;
  c.model_name = str_or(j, "_name_or_path", "", origin);
  if (c.model_name.empty()) c.model_name = type;
  const int64_t H = dim_key(j, "hidden_size", origin);
  const int64_t heads = dim_key(j, "num_attention_heads", origin);
  c.head_num = heads;
  if (spec.default_head_dim != 0) {
    // head_dim is the config's own field: absent means its default (Qwen3-MoE's: hidden_size / heads).
    const bool given = j.contains("head_dim") && !j["head_dim"].is_null();
    FTX_CHECK(given || spec.default_head_dim > 0 || H % heads == 0, origin,
              "hidden_size " + std::to_string(H) + " is not a multiple of num_attention_heads " + std::to_string(heads) +
                  " and there is no head_dim");
    c.size_per_head = given ? dim_key(j, "head_dim", origin)
                            : spec.default_head_dim > 0 ? spec.default_head_dim : H / heads;
    if (c.q_width() != H) c.hidden_size = H;
  } else {
    FTX_CHECK(H % heads == 0, origin,
              "hidden_size " + std::to_string(H) + " is not a multiple of num_attention_heads " + std::to_string(heads));
    c.size_per_head = H / heads;
    const int64_t head_dim = int_or(j, "head_dim", c.size_per_head, origin);
    FTX_CHECK(head_dim == c.size_per_head, origin,
              "head_dim = " + std::to_string(head_dim) + " is not hidden_size / num_attention_heads = " +
                  std::to_string(c.size_per_head) + " (not supported)");
  }
  c.kv_head_num = int_or(j, "num_key_value_heads", heads, origin);
  FTX_CHECK(c.kv_head_num > 0 && heads % c.kv_head_num == 0, origin,
            "num_key_value_heads = " + std::to_string(c.kv_head_num) + " does not divide num_attention_heads " +
                std::to_string(heads));
  c.attention = c.kv_head_num == 1 && heads > 1 ? AttentionKind::kMultiQuery : AttentionKind::kMultiHead;
  c.inter_size = dim_key(j, "intermediate_size", origin);
  c.num_layer = dim_key(j, "num_hidden_layers", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = positions_or(j, "max_position_embeddings", origin);
  const Activation act = activation_key(j, spec.act_key, spec.act_default, origin);
  FTX_CHECK(act == Activation(spec.act.nonlinearity()), origin,
            std::string(spec.act_key) + " = '" + str_or(j, spec.act_key, "", origin) + "' is not supported (" + type +
                ": " + spec.act_says + ")");
  c.activation = spec.act;
  c.normalization = Normalization::kRmsNorm;
  c.layernorm_eps = eps_or(j, "rms_norm_eps", 1e-6, origin);
  c.position = PositionEmbedding::kRotary;
  c.rotary_style = RotaryStyle::kHalfSplit;
  const HfRope rope = read_rope(j, origin, {{}, {}, spec.default_theta, 1.0, spec.rope_types, c.max_pos_seq_len,
                                          spec.default_original_max_positions, spec.rope_type_aliases,
                                          spec.rope_layer_type});
  FTX_CHECK(spec.partial_rotary || rope.partial_factor == 1.0, origin,
            rope.partial_where + " = " + json(rope.partial_factor).dump() + " is not supported (" + type +
                " rotates the whole head)");
  c.rotary_dim = rotary_dims(rope, c.size_per_head, origin);
  c.rotary_base = rope.theta;
  c.rope_scaling = rope.scaling;
  check_rope_scaling(c.rope_scaling, origin, c.rotary_dim);  // longrope's lists against the rotary dims
  spec.biases(j, origin, c);
  c.sliding_window = spec.sliding_window ? spec.sliding_window(j, c.num_layer, origin) : 0;
  c.qk_norm = spec.qk_norm;
  c.sandwich_norm = spec.sandwich_norm;
  c.tied_embeddings = bool_or(j, "tie_word_embeddings", spec.tied_default, origin);
  c.end_id = token_id_or(j, "eos_token_id", spec.default_eos, origin, &plan.warnings);
  c.start_id = token_id_or(j, "bos_token_id", spec.default_bos >= 0 ? spec.default_bos : c.end_id, origin);
  if (spec.more) spec.more(in, plan);

  const int64_t g_source = c.kv_head_num;
  const int tp = in.opt.tp;
  if (g_source > 1 && g_source < tp) {
    FTX_CHECK(tp % g_source == 0, origin,
              "num_key_value_heads " + std::to_string(g_source) + " does not divide the tensor parallel size " +
                  std::to_string(tp) + " (each rank needs whole key/value heads)");
    c.kv_head_num = tp;  // each K/V head copied to the ranks whose query heads use it
    plan.extra_ini.emplace_back("source_kv_head_num", std::to_string(g_source));
  }
}

class Hooks : public TensorHooks {
 public:
  bool layout_takes(const Source&, std::string& n, std::vector<TensorView>&, ConversionPlan& plan) override {
    return !(n == "lm_head.weight" && plan.cfg.tied_embeddings);  // a .bin may hold the shared table twice
  }

  // The fused QKV job of one layer (weight or bias): q, k, v concatenated on the output axis, each
  // of the three split over the ranks; K/V copied per rank when there are fewer heads than ranks.
  void fuse_qkv(const std::string& ft_name, const std::array<const Source*, 3>& v, const JobContext&,
                ConversionPlan& plan) override {
    // "model.layers.N.attention.query_key_value.W" -> "layers.N.W", the layer's name in the checkpoint.
    const std::string layer = ft_name.substr(6, ft_name.find(".attention.") - 6);
    const std::string key = layer + ft_name.substr(ft_name.rfind('.'));
    for (size_t k = 0; k < 3; ++k)
      FTX_CHECK(v[k] != nullptr, in->folder,
                std::string("no ") + "qkv"[k] + "_proj tensor for " + key +
                    " (q_proj, k_proj and v_proj must all be present)");
    const ModelConfig& c = plan.cfg;
    const int64_t d = c.size_per_head, g = c.kv_head_num;
    const int64_t g_source = int_or(in->config, "num_key_value_heads", c.head_num, in->cfg_path);
    TensorView K = v[1]->t, V = v[2]->t;
    if (g != g_source) {
      K = repeated_row_blocks(K, d, g / g_source, v[1]->origin + " (heads copied per rank)");
      V = repeated_row_blocks(V, d, g / g_source, v[2]->origin + " (heads copied per rank)");
    }
    TensorJob j;
    j.name = ft_name;
    j.source = v[0]->origin + " (+ k_proj, v_proj)";
    j.transpose = v[0]->t.shape.size() == 2;
    j.shards = {v[0]->t, K, V};
    j.merge_axis = 1;
    j.ragged_last = true;
    j.seg_sizes = {c.head_num * d, g * d, g * d};
    if (g == 1) j.seg_split = {true, false, false};  // multi-query: K and V whole on every rank
    j.split = OutSplit::kColumn;
    plan.jobs.push_back(std::move(j));
  }

  void finish(ConversionPlan& plan) override {
    if (!plan.cfg.tied_embeddings)
      FTX_CHECK(in->find("lm_head.weight"), in->folder, "tie_word_embeddings is false but there is no lm_head.weight");
  }
};

}  // namespace

std::vector<KeyRule> llama_like_keys(const char* head_dim) {
  return join(
      {
          {"hidden_size", R, head_dim ? "hidden_size" : "head_num x size_per_head"},
          {"num_attention_heads", R, "head_num"},
          {"num_key_value_heads", R, "kv_head_num (null: num_attention_heads)"},
          {"head_dim", R, head_dim ? head_dim : "must be hidden_size / num_attention_heads (others refused)"},
          {"num_hidden_layers", R, "num_layer"},
          {"intermediate_size", R, "inter_size"},
          {"vocab_size", R, "vocab_size"},
          {"max_position_embeddings", R, "max_pos_seq_len (recorded; rotary positions are not limited by it)"},
          {"hidden_act", R, "silu: SwiGLU (others refused)"},
          {"rms_norm_eps", R, "layernorm_eps (RMSNorm)"},
          {"tie_word_embeddings", R, "tied_embeddings"},
          {"attention_dropout", N, kDropout},
          {"initializer_range", N, "training initialisation"},
      },
      rope_keys(nullptr, nullptr));
}

int64_t sliding_window_key(const json& j, const std::string& origin) {
  auto w = j.find("sliding_window");
  if (w == j.end() || w->is_null()) return 0;
  FTX_CHECK(w->is_number_integer() && w->get<int64_t>() > 0, origin, "sliding_window = " + w->dump() + " is not a positive integer");
  return w->get<int64_t>();
}

int64_t qwen_sliding_window(const json& j, int64_t layers, const std::string& origin) {
  // transformers refuses a layer type it does not know when it loads the config, whatever the window.
  auto types = j.find("layer_types");
  if (types != j.end() && !types->is_null()) {
    FTX_CHECK(types->is_array() && static_cast<int64_t>(types->size()) == layers, origin,
              "layer_types = " + types->dump() + " is not a list of " + std::to_string(layers) + " layer types");
    for (const json& t : *types)
      FTX_CHECK(t == "full_attention" || t == "sliding_attention", origin,
                "layer_types holds " + t.dump() + " (full_attention or sliding_attention)");
  }
  // Without use_sliding_window the window is not read (Qwen2-MoE's config saves it as 0 then).
  if (!bool_or(j, "use_sliding_window", false, origin)) return 0;
  const int64_t w = sliding_window_key(j, origin);
  if (w == 0) return 0;
  int64_t sliding = 0;
  auto lt = j.find("layer_types");
  if (lt != j.end() && lt->is_array()) {
    for (auto& t : *lt) sliding += t == "sliding_attention";
  } else {
    const int64_t from = int_or(j, "max_window_layers", 0, origin);
    sliding = from >= layers ? 0 : layers - std::max<int64_t>(from, 0);
  }
  if (sliding == 0) return 0;
  FTX_CHECK(sliding == layers, origin,
            "use_sliding_window true with " + std::to_string(sliding) + " of " + std::to_string(layers) +
                " layers sliding (layer_types / max_window_layers) is not supported: ftx's window is the same for every layer");
  return w;
}

void no_attention_bias(const json& j, const std::string& origin, const std::string& display, ModelConfig& c) {
  c.has_bias = false;
  c.qkv_bias = false;
  FTX_CHECK(!bool_or(j, "attention_bias", false, origin), origin,
            "attention_bias true is not supported (" + display + "'s q/k/v and o biases without MLP biases)");
}

std::vector<RopeScalingType> qwen3_rope_types() {
  return {RopeScalingType::kLinear, RopeScalingType::kLlama3, RopeScalingType::kYarn};
}

std::vector<KeyRule> qwen3_rope_keys(std::vector<KeyRule> k) {
  k = overriding(std::move(k),
                 {{"rope_parameters", R,
                   "5.x: rope_type (default, linear, llama3, yarn; others refused), rope_theta, factor, "
                   "original_max_position_embeddings, low_freq_factor, high_freq_factor (llama3), beta_fast, "
                   "beta_slow, mscale, mscale_all_dim, truncate, attention_factor (yarn); partial_rotary_factor other "
                   "than 1 refused; any other field refused"},
                  {"partial_rotary_factor", R, "1 only (Qwen3 rotates the whole head; others refused)"}});
  k.push_back({"original_max_position_embeddings", R,
               "yarn's original length when given at the top level (must agree with rope_parameters')"});
  return k;
}

HfFamily llama_like_family(const LlamaLike& spec) {
  HfFamily f = spec.family;
  f.prefixes = {"model."};
  f.qkv = QkvOrder::kQkvMajor;
  f.read = [spec](HfCheckpoint& in, ConversionPlan& plan) { read(spec, in, plan); };
  f.layout = [](HfCheckpoint&, const ModelConfig& c) -> const ArchLayout& {
    if (c.sandwich_norm) return sandwich_layout(c.qk_norm);
    return c.qk_norm ? qk_norm_layout() : llama_layout();
  };
  f.hooks = [] { return std::make_unique<Hooks>(); };
  return f;
}

}  // namespace ftx::hf
