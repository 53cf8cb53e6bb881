// HuggingFace LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM -> the FT layout of a
// rope/SwiGLU/RMSNorm/GQA model (section [gpt], as convert-megatron writes Megatron Core's):
//  * q_proj [n·d, H], k_proj and v_proj [g·d, H] -> query_key_value [H, (n + 2g)·d / T] per rank,
//    [Q | K | V] of the rank's heads; with T > g > 1 each K/V head is copied to the T/g ranks
//    whose query heads use it (TensorRT-LLM's layout), so the folder has kv_head_num = T;
//  * gate_proj (activated: silu) -> mlp.dense_h_to_4h, up_proj -> mlp.dense_h_to_4h.gate,
//    down_proj -> mlp.dense_4h_to_h, as FT's gated FFN computes act(x·W) · (x·W_gate);
//  * RMSNorm weights -> the layernorm files without biases (normalization = rmsnorm);
//  * rotary on half-split pairs (transformers' rotate_half), rope_theta and rope scaling (linear,
//    llama3) read from rope_parameters (5.x) or the top level / rope_scaling (4.x);
//  * Qwen2: q/k/v biases (qkv_bias = 1, no other bias);
//  * Mistral / Qwen2 sliding windows: config.ini sliding_window (the engine runs it with a circular
//    cache of that length, or refuses positions beyond it).
#include "lib/convert/hf_llama.h"

#include <map>

#include "formats/error.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/hf_common.h"
#include "lib/convert/hf_config.h"
#include "lib/convert/layout_table.h"
#include "lib/convert/source_names.h"

namespace ftx {

namespace {

using json = nlohmann::json;
using hf::bool_or;
using hf::dim_key;
using hf::int_or;
using hf::str_or;

const std::string kL = R"(layers\.(\d+)\.)";
const std::string kFL = "model.layers.$1.";

// Source names after `model.` is stripped (lm_head.weight has no prefix). q/k/v are gathered by
// the adapter (qkv_job), never matched here: their rules say what the checkpoint calls them.
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

// The sliding window the model attends with, 0 for none. Qwen2 slides only where
// use_sliding_window is true, on the layers layer_types (5.x) or max_window_layers (4.x) say.
int64_t sliding_window(const std::string& type, const json& j, int64_t layers, const std::string& origin) {
  if (type == "llama") return 0;
  auto w = j.find("sliding_window");
  if (w == j.end() || w->is_null()) return 0;
  FTX_CHECK(w->is_number_integer() && w->get<int64_t>() > 0, origin, "sliding_window = " + w->dump() + " is not a positive integer");
  if (type == "mistral") return w->get<int64_t>();
  if (!bool_or(j, "use_sliding_window", false, origin)) return 0;
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
  return w->get<int64_t>();
}

ModelConfig llama_config(const std::string& type, const json& j, const std::string& origin,
                         std::vector<std::string>* notes) {
  ModelConfig c;
  c.arch = Architecture::kGpt;
  c.model_name = str_or(j, "_name_or_path", "", origin);
  if (c.model_name.empty()) c.model_name = type;
  const int64_t H = dim_key(j, "hidden_size", origin);
  const int64_t heads = dim_key(j, "num_attention_heads", origin);
  FTX_CHECK(H % heads == 0, origin,
            "hidden_size " + std::to_string(H) + " is not a multiple of num_attention_heads " + std::to_string(heads));
  c.head_num = heads;
  c.size_per_head = H / heads;
  const int64_t head_dim = int_or(j, "head_dim", c.size_per_head, origin);
  FTX_CHECK(head_dim == c.size_per_head, origin,
            "head_dim = " + std::to_string(head_dim) + " is not hidden_size / num_attention_heads = " +
                std::to_string(c.size_per_head) + " (not supported)");
  c.kv_head_num = int_or(j, "num_key_value_heads", heads, origin);
  FTX_CHECK(c.kv_head_num > 0 && heads % c.kv_head_num == 0, origin,
            "num_key_value_heads = " + std::to_string(c.kv_head_num) + " does not divide num_attention_heads " +
                std::to_string(heads));
  c.attention = c.kv_head_num == 1 && heads > 1 ? AttentionKind::kMultiQuery : AttentionKind::kMultiHead;
  c.inter_size = dim_key(j, "intermediate_size", origin);
  c.num_layer = dim_key(j, "num_hidden_layers", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = hf::positions_or(j, "max_position_embeddings", origin);
  const Activation act = hf::activation_key(j, "hidden_act", "silu", origin);
  FTX_CHECK(act == Activation::kSilu, origin,
            "hidden_act = '" + str_or(j, "hidden_act", "", origin) + "' is not supported (" + type + ": silu, i.e. SwiGLU)");
  c.activation = Activation::kSwiGlu;
  c.normalization = Normalization::kRmsNorm;
  c.layernorm_eps = hf::eps_or(j, "rms_norm_eps", 1e-6, origin);
  c.position = PositionEmbedding::kRotary;
  c.rotary_style = RotaryStyle::kHalfSplit;
  const hf::HfRope rope = hf::read_rope(j, origin, {{}, {}, 10000.0, 1.0});
  c.rotary_dim = hf::rotary_dims(rope, c.size_per_head, origin);
  c.rotary_base = rope.theta;
  c.rope_scaling = rope.scaling;
  if (type == "llama") {
    const bool attn_bias = bool_or(j, "attention_bias", false, origin), mlp_bias = bool_or(j, "mlp_bias", false, origin);
    FTX_CHECK(attn_bias == mlp_bias, origin,
              std::string("attention_bias ") + (attn_bias ? "true" : "false") + " with mlp_bias " +
                  (mlp_bias ? "true" : "false") + " is not supported (FT's layout has all linear biases or none)");
    c.has_bias = attn_bias;
  } else {
    c.has_bias = false;
    c.qkv_bias = type == "qwen2";
    if (type == "qwen2")
      FTX_CHECK(bool_or(j, "attention_bias", true, origin), origin,
                "attention_bias false is not supported (Qwen2 has q/k/v biases)");
  }
  c.sliding_window = sliding_window(type, j, c.num_layer, origin);
  c.tied_embeddings = bool_or(j, "tie_word_embeddings", false, origin);
  c.end_id = hf::token_id_or(j, "eos_token_id", type == "qwen2" ? 151643 : 2, origin, notes);
  c.start_id = hf::token_id_or(j, "bos_token_id", c.end_id, origin);
  return c;
}

struct Source {
  std::string name;    // without `model.`
  std::string origin;  // "file:original name"
  TensorView t;
};

std::string strip_model(const std::string& n) { return n.rfind("model.", 0) == 0 ? n.substr(6) : n; }

// The fused QKV job of one layer (weight or bias): q, k, v concatenated on the output axis, each
// of the three split over the ranks; K/V copied per rank when there are fewer heads than ranks.
TensorJob qkv_job(const std::string& ft_name, const Source* q, const Source* k, const Source* v, const ModelConfig& c,
                  int64_t g_source) {
  const int64_t d = c.size_per_head, g = c.kv_head_num;
  TensorView K = k->t, V = v->t;
  if (g != g_source) {
    K = repeated_row_blocks(K, d, g / g_source, k->origin + " (heads copied per rank)");
    V = repeated_row_blocks(V, d, g / g_source, v->origin + " (heads copied per rank)");
  }
  TensorJob j;
  j.name = ft_name;
  j.source = q->origin + " (+ k_proj, v_proj)";
  j.transpose = q->t.shape.size() == 2;
  j.shards = {q->t, K, V};
  j.merge_axis = 1;
  j.ragged_last = true;
  j.seg_sizes = {c.head_num * d, g * d, g * d};
  if (g == 1) j.seg_split = {true, false, false};  // multi-query: K and V whole on every rank
  j.split = OutSplit::kColumn;
  return j;
}

}  // namespace

std::string hf_llama_model_type(const std::string& model_type) {
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") return model_type;
  return "";
}

ConversionPlan plan_hf_llama(const ConvertOptions& opt, const std::string& type, const json& j,
                             const std::string& folder) {
  const std::string cfg_path = folder + "/config.json";
  ConversionPlan plan;
  plan.source_format = "hf";
  plan.source_path = opt.in_path;
  plan.cfg = llama_config(type, j, cfg_path, &plan.warnings);
  ModelConfig& c = plan.cfg;
  const int64_t g_source = c.kv_head_num;
  if (g_source > 1 && g_source < opt.tp) {
    FTX_CHECK(opt.tp % g_source == 0, cfg_path,
              "num_key_value_heads " + std::to_string(g_source) + " does not divide the tensor parallel size " +
                  std::to_string(opt.tp) + " (each rank needs whole key/value heads)");
    c.kv_head_num = opt.tp;  // each K/V head copied to the ranks whose query heads use it
    plan.extra_ini.emplace_back("source_kv_head_num", std::to_string(g_source));
  }
  plan.extra_ini.emplace_back("model_type", type);

  const ArchLayout& layout = llama_layout();
  std::vector<Source> sources;
  NamePrefixes prefixes;
  for (auto& t : hf::load_weights(opt.in_path)) {
    sources.push_back({strip_model(t.name), t.tensor.storage.origin + ":" + t.name, t.tensor});
    prefixes.add(t.name, sources.back().name);
    if (!layout_skips(layout, sources.back().name)) check_float_weight(t.tensor, sources.back().origin);
  }
  plan.source_names = checkpoint_names(layout, std::move(prefixes));

  JobContext ctx;
  ctx.heads_per_shard = c.head_num;
  ctx.head_dim = c.size_per_head;
  ctx.hidden = c.hidden();
  std::map<std::string, std::vector<const Source*>> qkv;  // "layers.N.<weight|bias>" -> q, k, v
  for (const Source& s : sources) {
    const std::string& n = s.name;
    if (n == "lm_head.weight" && c.tied_embeddings) continue;  // a .bin may hold the shared table twice
    const size_t at = n.find(".self_attn.");
    if (at != std::string::npos) {
      const std::string rest = n.substr(at + 11);
      const int part = rest.rfind("q_proj.", 0) == 0 ? 0 : rest.rfind("k_proj.", 0) == 0 ? 1
                     : rest.rfind("v_proj.", 0) == 0 ? 2 : -1;
      if (part >= 0) {
        auto& v = qkv[n.substr(0, at) + "." + rest.substr(7)];
        v.resize(3, nullptr);
        v[static_cast<size_t>(part)] = &s;
        continue;
      }
    }
    auto m = match_layout(layout, n, folder);
    if (m) add_layout_jobs(*m, {s.t}, s.origin, ctx, plan.jobs);
  }
  for (auto& [key, v] : qkv) {
    for (size_t k = 0; k < 3; ++k)
      FTX_CHECK(v[k] != nullptr, folder, std::string("no ") + "qkv"[k] + "_proj tensor for " + key +
                                             " (q_proj, k_proj and v_proj must all be present)");
    const std::string what = key.substr(key.rfind('.') + 1);
    FTX_CHECK(what == "weight" || what == "bias", folder, "unexpected tensor '" + v[0]->name + "'");
    const std::string layer = key.substr(0, key.rfind('.'));
    plan.jobs.push_back(qkv_job("model." + layer + ".attention.query_key_value." + what, v[0], v[1], v[2], c,
                                g_source));
  }
  if (!c.tied_embeddings) {
    bool head = false;
    for (const Source& s : sources) head = head || s.name == "lm_head.weight";
    FTX_CHECK(head, folder, "tie_word_embeddings is false but there is no lm_head.weight");
  }
  hf::add_tokenizer_files(folder, plan);
  return plan;
}

}  // namespace ftx
