// HuggingFace GPT-J, GPT-NeoX, BLOOM, OPT and XGLM into the FT layout (docs/ft-layout.md).
// config.json -> ModelConfig, source names -> FT names through the
// layout tables of layout_table.cc, plus the tensors FT's converters compute from several sources:
//  * GPT-J, OPT, XGLM: q_proj, k_proj, v_proj -> one fused [H, 3H] query_key_value (and bias);
//  * GPT-NeoX with use_parallel_residual: mlp.attention.bias.sum = (attention.dense.bias +
//    mlp.dense_4h_to_h.bias) / T, as FT's runtime adds it on every rank before the all-reduce.
//    Without parallel residual FT's runtime adds the two biases once, after the all-reduce, so
//    ftx writes them undivided (FT's converter divides them by T there: a bug for T > 1);
//  * OPT: wpe = embed_positions[2:]; wte = embed_tokens · project_inᵀ and lm_head = embed_tokens ·
//    project_out when word_embed_proj_dim differs from hidden_size, else both embed_tokens (FT
//    always writes lm_head);
//  * XGLM (no public FT converter; layout documented in ftx-convert-hf(1)): wpe = the sinusoidal
//    table rows [2, 2 + max_position_embeddings), wte = embed_tokens · sqrt(d_model) when
//    scale_embedding, lm_head = embed_tokens unscaled (tied when there is no scale).
#include <cmath>
#include <map>
#include <regex>

#include "formats/error.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/hf_arch.h"
#include "lib/convert/hf_common.h"
#include "lib/convert/hf_config.h"
#include "lib/convert/layout_table.h"
#include "lib/convert/source_names.h"

namespace ftx {

namespace {

using json = nlohmann::json;
using hf::bool_or;
using hf::dim_key;
using hf::dim_key_any;
using hf::dim_or;
using hf::int_or;
using hf::str_or;

struct ArchSpec {
  const char* model_type;
  std::vector<std::string> prefixes;  // stripped from source names (the first that matches)
  const ArchLayout& (*layout)();
  QkvOrder qkv;                       // order of a fused QKV's output features
};

const std::vector<ArchSpec>& specs() {
  static const std::vector<ArchSpec> s = {
      {"gptj", {"transformer."}, hf_gptj_layout, QkvOrder::kNone},
      {"gpt_neox", {"gpt_neox."}, hf_gpt_neox_layout, QkvOrder::kHeadQkv},
      {"bloom", {"transformer."}, hf_bloom_layout, QkvOrder::kHeadQkv},
      {"opt", {"model.decoder.", "decoder."}, hf_opt_layout, QkvOrder::kNone},
      {"xglm", {"model."}, hf_xglm_layout, QkvOrder::kNone},
  };
  return s;
}

const ArchSpec& spec_for(const std::string& type) {
  for (auto& s : specs())
    if (type == s.model_type) return s;
  throw Error("internal: no HF architecture '" + type + "'");
}

std::string name_or(const json& j, const std::string& d, const std::string& origin) {
  std::string n = str_or(j, "_name_or_path", "", origin);
  return n.empty() ? d : n;
}

// Heads and hidden size, checked.
void set_heads(ModelConfig& c, int64_t H, int64_t heads, const std::string& origin) {
  FTX_CHECK(H % heads == 0, origin,
            "hidden size " + std::to_string(H) + " is not a multiple of the head count " + std::to_string(heads));
  c.head_num = heads;
  c.kv_head_num = heads;
  c.size_per_head = H / heads;
}

ModelConfig gptj_config(const json& j, const std::string& origin) {
  ModelConfig c;
  c.arch = Architecture::kGptJ;
  c.model_name = name_or(j, "gptj", origin);
  const int64_t H = dim_key(j, "n_embd", origin);
  set_heads(c, H, dim_key(j, "n_head", origin), origin);
  c.inter_size = dim_or(j, "n_inner", 4 * H, origin);  // HF: n_inner null = 4·n_embd
  c.num_layer = dim_key(j, "n_layer", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = hf::positions_or(j, "n_positions", origin);
  c.position = PositionEmbedding::kRotary;
  c.rotary_style = RotaryStyle::kInterleaved;
  // rotary_dim null means the whole head (HF GPTJAttention); FT's converter writes "None" there,
  // which FT's GetInteger cannot read, so ftx writes the number.
  c.rotary_dim = int_or(j, "rotary_dim", c.size_per_head, origin);
  FTX_CHECK(c.rotary_dim > 0 && c.rotary_dim <= c.size_per_head && c.rotary_dim % 2 == 0, origin,
            "rotary_dim = " + std::to_string(c.rotary_dim) + " is not an even number in [2, " +
                std::to_string(c.size_per_head) + "] (the head size)");
  c.parallel_residual = true;
  c.shared_input_norm = true;
  FTX_CHECK(!bool_or(j, "tie_word_embeddings", false, origin), origin,
            "tie_word_embeddings true is not supported for gptj (its lm_head has its own weight and bias)");
  c.tied_embeddings = false;
  c.has_lm_head_bias = true;
  c.activation = hf::activation_key(j, "activation_function", "gelu_new", origin);
  c.layernorm_eps = hf::eps_or(j, "layer_norm_epsilon", 1e-5, origin);
  c.start_id = hf::token_id_or(j, "bos_token_id", 50256, origin);
  c.end_id = hf::token_id_or(j, "eos_token_id", 50256, origin);
  return c;
}

ModelConfig neox_config(const json& j, const std::string& origin) {
  ModelConfig c;
  c.arch = Architecture::kGptNeoX;
  c.model_name = name_or(j, "gptneox", origin);
  const int64_t H = dim_key(j, "hidden_size", origin);
  set_heads(c, H, dim_key(j, "num_attention_heads", origin), origin);
  c.inter_size = dim_key(j, "intermediate_size", origin);
  c.num_layer = dim_key(j, "num_hidden_layers", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = hf::positions_or(j, "max_position_embeddings", origin);
  c.position = PositionEmbedding::kRotary;
  c.rotary_style = RotaryStyle::kHalfSplit;
  // FT: int(size_per_head * rotary_pct), Python's truncation. transformers 4.4x writes both the
  // old keys and their new names (partial_rotary_factor, rope_theta), 5.x only rope_parameters.
  const hf::HfRope rope = hf::read_rope(j, origin, {{"rotary_emb_base"}, {"rotary_pct"}, 10000.0, 0.25});
  c.rotary_dim = hf::rotary_dims(rope, c.size_per_head, origin);
  c.rotary_base = rope.theta;
  c.rope_scaling = rope.scaling;
  FTX_CHECK(bool_or(j, "attention_bias", true, origin), origin,
            "attention_bias false is not supported (FT's GPT-NeoX has query_key_value and dense biases)");
  c.parallel_residual = bool_or(j, "use_parallel_residual", true, origin);
  // FT's GPT-NeoX always reads model.lm_head.weight: tied, it is written from embed_in.
  c.tied_embeddings = false;
  c.activation = hf::activation_key(j, "hidden_act", "gelu", origin);
  c.layernorm_eps = hf::eps_or(j, "layer_norm_eps", 1e-5, origin);
  c.start_id = hf::token_id_or(j, "bos_token_id", 0, origin);
  c.end_id = hf::token_id_or(j, "eos_token_id", 2, origin);
  return c;
}

ModelConfig bloom_config(const json& j, const std::string& origin) {
  ModelConfig c;
  c.arch = Architecture::kBloom;
  c.model_name = name_or(j, "bloom", origin);
  const int64_t H = dim_key_any(j, {"hidden_size", "n_embed"}, origin);
  set_heads(c, H, dim_key_any(j, {"n_head", "num_attention_heads"}, origin), origin);
  c.inter_size = 4 * H;  // fixed in BLOOM
  c.num_layer = dim_key_any(j, {"n_layer", "num_hidden_layers"}, origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  // HF BLOOM with this flag takes each residual from the layernorm's output. FT maps it to
  // post_layernorm, which computes something else; ftx refuses rather than run a wrong model.
  FTX_CHECK(!bool_or(j, "apply_residual_connection_post_layernorm", false, origin), origin,
            "apply_residual_connection_post_layernorm true is not supported (neither FT's post_layernorm "
            "nor ftx computes it)");
  c.position = PositionEmbedding::kAlibi;
  c.max_pos_seq_len = 0;
  c.has_pre_decoder_layernorm = true;
  c.activation = Activation::kGeluTanh;  // bloom_gelu_forward is the tanh approximation
  c.layernorm_eps = hf::eps_or(j, "layer_norm_epsilon", 1e-5, origin);
  c.tied_embeddings = bool_or(j, "tie_word_embeddings", true, origin);
  c.start_id = hf::token_id_or(j, "bos_token_id", 1, origin);
  c.end_id = hf::token_id_or(j, "eos_token_id", 2, origin);
  return c;
}

ModelConfig opt_config(const json& j, const std::string& origin) {
  ModelConfig c;
  c.arch = Architecture::kOpt;
  c.model_name = name_or(j, "opt", origin);
  const int64_t H = dim_key(j, "hidden_size", origin);
  set_heads(c, H, dim_key(j, "num_attention_heads", origin), origin);
  c.inter_size = dim_key(j, "ffn_dim", origin);
  c.num_layer = dim_key(j, "num_hidden_layers", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = dim_key(j, "max_position_embeddings", origin);
  c.position = PositionEmbedding::kLearned;
  c.position_offset = 2;  // OPTLearnedPositionalEmbedding; model.wpe.bin drops the first 2 rows
  const bool pre = bool_or(j, "do_layer_norm_before", true, origin);
  c.norm = pre ? NormPlacement::kPre : NormPlacement::kPost;
  c.has_post_decoder_layernorm = pre && !bool_or(j, "_remove_final_layer_norm", false, origin);
  FTX_CHECK(bool_or(j, "enable_bias", true, origin), origin, "enable_bias false is not supported");
  FTX_CHECK(bool_or(j, "layer_norm_elementwise_affine", true, origin), origin,
            "layer_norm_elementwise_affine false is not supported");
  c.activation = hf::activation_key(j, "activation_function", "relu", origin);
  c.layernorm_eps = 1e-5;  // nn.LayerNorm's default; OPT has no key for it
  c.tied_embeddings = false;  // FT's converter always writes lm_head
  c.start_id = hf::token_id_or(j, "bos_token_id", 2, origin);
  c.end_id = hf::token_id_or(j, "eos_token_id", 2, origin);
  return c;
}

ModelConfig xglm_config(const json& j, const std::string& origin) {
  ModelConfig c;
  c.arch = Architecture::kXglm;
  c.model_name = name_or(j, "xglm", origin);
  const int64_t H = dim_key(j, "d_model", origin);
  set_heads(c, H, dim_key(j, "attention_heads", origin), origin);
  c.inter_size = dim_key(j, "ffn_dim", origin);
  c.num_layer = dim_key(j, "num_layers", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = dim_key(j, "max_position_embeddings", origin);
  c.position = PositionEmbedding::kSinusoidal;  // stored as model.wpe.bin
  c.position_offset = 2;
  c.activation = hf::activation_key(j, "activation_function", "gelu", origin);
  c.layernorm_eps = 1e-5;
  c.embedding_scale = 1.0;  // folded into model.wte.bin
  // A scaled input table differs from the (unscaled) output table, so lm_head is written then.
  c.tied_embeddings = !bool_or(j, "scale_embedding", true, origin) && bool_or(j, "tie_word_embeddings", true, origin);
  c.start_id = hf::token_id_or(j, "bos_token_id", 0, origin);
  c.end_id = hf::token_id_or(j, "eos_token_id", 2, origin);
  return c;
}

ModelConfig config_for(const std::string& type, const json& j, const std::string& origin) {
  if (type == "gptj") return gptj_config(j, origin);
  if (type == "gpt_neox") return neox_config(j, origin);
  if (type == "bloom") return bloom_config(j, origin);
  if (type == "opt") return opt_config(j, origin);
  return xglm_config(j, origin);
}

std::string strip(const ArchSpec& s, const std::string& n) {
  for (auto& p : s.prefixes)
    if (n.rfind(p, 0) == 0) return n.substr(p.size());
  return n;
}

TensorJob replicated_job(const std::string& ft_name, TensorView t, const std::string& source) {
  TensorJob job;
  job.name = ft_name;
  job.source = source;
  job.shards = {std::move(t)};
  job.merge_axis = -1;
  job.split = OutSplit::kReplicated;
  return job;
}

// A source tensor after name normalisation.
struct Source {
  std::string name;    // normalised
  std::string origin;  // "file:original name"
  TensorView t;
};

}  // namespace

std::string hf_arch_model_type(const std::string& model_type) {
  std::string l;
  for (char ch : model_type) l += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (l == "gptj" || l == "gpt-j") return "gptj";
  if (l == "gpt_neox" || l == "gptneox" || l == "gpt-neox") return "gpt_neox";
  if (l == "bloom" || l == "opt" || l == "xglm") return l;
  return "";
}

ConversionPlan plan_hf_arch(const ConvertOptions& opt, const std::string& model_type, const json& j,
                            const std::string& folder) {
  const std::string cfg_path = folder + "/config.json";
  const ArchSpec& spec = spec_for(model_type);
  ConversionPlan plan;
  plan.source_format = "hf";
  plan.source_path = opt.in_path;
  plan.cfg = config_for(model_type, j, cfg_path);
  ModelConfig& c = plan.cfg;
  const int64_t H = c.hidden();
  if (model_type == "bloom") plan.extra_ini.emplace_back("model_variant", "bloom-pre");
  if (model_type == "opt") plan.extra_ini.emplace_back("int8", "False");  // FT's OPT converter writes it
  plan.extra_ini.emplace_back("model_type", model_type);

  const ArchLayout& layout = spec.layout();
  std::vector<Source> sources;
  NamePrefixes prefixes;
  for (auto& t : hf::load_weights(opt.in_path)) {
    sources.push_back({strip(spec, t.name), t.tensor.storage.origin + ":" + t.name, t.tensor});
    prefixes.add(t.name, sources.back().name);
    if (!layout_skips(layout, sources.back().name)) check_float_weight(t.tensor, sources.back().origin);
  }
  plan.source_names = checkpoint_names(layout, std::move(prefixes));

  JobContext ctx;
  ctx.heads_per_shard = c.head_num;
  ctx.head_dim = c.size_per_head;
  ctx.hidden = H;
  ctx.qkv = spec.qkv;

  std::map<std::string, std::vector<const Source*>> parts;      // ft name -> q, k, v
  std::map<std::string, const Source*> special;                 // consumed by the code below
  std::map<int64_t, std::vector<const Source*>> neox_biases;    // layer -> attention, mlp bias
  for (const Source& s : sources) {
    const std::string& n = s.name;
    if ((model_type == "opt" || model_type == "xglm") &&
        (n == "embed_tokens.weight" || n == "project_in.weight" || n == "project_out.weight" || n == "lm_head.weight")) {
      special[n] = &s;
      continue;
    }
    if ((model_type == "bloom") && n == "lm_head.weight") {
      if (!c.tied_embeddings) plan.jobs.push_back(replicated_job("model.lm_head.weight", s.t, s.origin));
      continue;  // tied: the same table as word_embeddings
    }
    if (model_type == "gpt_neox" && bool_or(j, "tie_word_embeddings", false, cfg_path)) {
      if (n == "embed_out.weight") continue;  // pytorch_model.bin keeps the shared table twice
      if (n == "embed_in.weight") plan.jobs.push_back(replicated_job("model.lm_head.weight", s.t, s.origin));
    }
    if (model_type == "gpt_neox" && c.parallel_residual) {
      static const std::regex bias(R"(layers\.(\d+)\.(attention\.dense|mlp\.dense_4h_to_h)\.bias)");
      std::smatch m;
      if (std::regex_match(n, m, bias)) {
        auto& v = neox_biases[std::stoll(m[1])];
        v.resize(2, nullptr);
        v[m[2] == "attention.dense" ? 0 : 1] = &s;
        continue;
      }
    }
    TensorView t = s.t;
    if (model_type == "opt" && n == "embed_positions.weight") {
      // OPTLearnedPositionalEmbedding: row = position + 2; FT stores rows [2:].
      FTX_CHECK(t.shape.size() == 2 && t.shape[0] > 2, s.origin, "embed_positions has shape " + shape_to_string(t.shape));
      t.offset += 2 * (t.strides.empty() ? t.shape[1] : t.strides[0]);
      t.shape[0] -= 2;
    }
    auto m = match_layout(layout, n, folder);
    if (!m) continue;
    if (m->rule->part >= 0) {
      auto& v = parts[m->ft_name];
      v.resize(3, nullptr);
      v[static_cast<size_t>(m->rule->part)] = &s;
      continue;
    }
    add_layout_jobs(*m, {t}, s.origin, ctx, plan.jobs);
  }

  // Q, K, V -> one fused tensor, [Q | K | V] split per rank like a Megatron QKV.
  for (auto& [ft_name, v] : parts) {
    std::vector<TensorView> shards;
    for (size_t k = 0; k < 3; ++k) {
      FTX_CHECK(v[k] != nullptr, folder,
                std::string("no ") + "qkv"[k] + "_proj tensor for " + ft_name + " (q, k and v projections must all be present)");
      FTX_CHECK(v[k]->t.shape == v[0]->t.shape, v[k]->origin,
                "shape " + shape_to_string(v[k]->t.shape) + " differs from q_proj's " + shape_to_string(v[0]->t.shape));
      shards.push_back(v[k]->t);
    }
    auto m = match_layout(layout, v[0]->name, folder);
    JobContext qctx = ctx;
    qctx.separate_qkv = true;
    add_layout_jobs(*m, shards, v[0]->origin + " (+ k_proj, v_proj)", qctx, plan.jobs);
  }

  // GPT-NeoX parallel residual: one bias, divided by T (FT adds it on every rank before the reduce).
  for (auto& [layer, v] : neox_biases) {
    const std::string name = "model.layers." + std::to_string(layer) + ".mlp.attention.bias.sum";
    FTX_CHECK(v[0] && v[1], folder, "layer " + std::to_string(layer) +
                                        " needs both attention.dense.bias and mlp.dense_4h_to_h.bias");
    plan.jobs.push_back(replicated_job(
        name, ft_divided_sum({v[0]->t, v[1]->t}, opt.tp, opt.dtype, name), v[0]->origin + " + " + v[1]->origin));
  }

  if (model_type == "opt" || model_type == "xglm") {
    auto get = [&](const std::string& n) -> const Source* {
      auto it = special.find(n);
      return it == special.end() ? nullptr : it->second;
    };
    const Source* emb = get("embed_tokens.weight");
    FTX_CHECK(emb, folder, "no embed_tokens.weight");
    const bool tied_src = bool_or(j, "tie_word_embeddings", true, cfg_path);
    const Source* head = tied_src ? emb : get("lm_head.weight");
    FTX_CHECK(head, folder, "tie_word_embeddings is false but there is no lm_head.weight");
    if (model_type == "opt") {
      const Source* pin = get("project_in.weight");
      const Source* pout = get("project_out.weight");
      const int64_t wp = dim_or(j, "word_embed_proj_dim", H, cfg_path);
      FTX_CHECK((pin != nullptr) == (wp != H) && (pout != nullptr) == (wp != H), folder,
                "word_embed_proj_dim " + std::to_string(wp) + " vs hidden_size " + std::to_string(H) +
                    ": project_in/project_out must exist exactly when they differ");
      if (pin) {
        // inputs: project_in(embed_tokens[id]); logits: embed_tokens · project_out(h).
        plan.jobs.push_back(replicated_job("model.wte", matmul_tensor(emb->t, pin->t, true, "model.wte"),
                                           emb->origin + " x " + pin->origin + "^T"));
        plan.jobs.push_back(replicated_job("model.lm_head.weight",
                                           matmul_tensor(head->t, pout->t, false, "model.lm_head.weight"),
                                           head->origin + " x " + pout->origin));
      } else {
        plan.jobs.push_back(replicated_job("model.wte", emb->t, emb->origin));
        plan.jobs.push_back(replicated_job("model.lm_head.weight", head->t, head->origin));
      }
    } else {
      plan.jobs.push_back(replicated_job("model.wpe", sinusoidal_table(2, c.max_pos_seq_len, H, "model.wpe"),
                                         "sinusoidal positions (XGLM, offset 2)"));
      if (bool_or(j, "scale_embedding", true, cfg_path)) {
        const double scale = std::sqrt(static_cast<double>(H));
        plan.jobs.push_back(replicated_job("model.wte", scaled_tensor(emb->t, scale, "model.wte"),
                                           emb->origin + " x sqrt(d_model)"));
      } else {
        plan.jobs.push_back(replicated_job("model.wte", emb->t, emb->origin));
      }
      if (!c.tied_embeddings) plan.jobs.push_back(replicated_job("model.lm_head.weight", head->t, head->origin));
    }
  }
  hf::add_tokenizer_files(folder, plan);
  return plan;
}

}  // namespace ftx
