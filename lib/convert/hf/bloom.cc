// HuggingFace BLOOM into FT's [gpt] section with model_variant=bloom-pre: ALiBi, the embedding
// layernorm, tanh GELU, query_key_value stored per head [n, 3, d] (reordered as for GPT-NeoX).
#include "formats/error.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = {
      {"hidden_size", R, "head_num x size_per_head (older name n_embed)"},
      {"n_embed", R, "older name of hidden_size"},
      {"n_head", R, "head_num (or num_attention_heads)"},
      {"num_attention_heads", R, "head_num"},
      {"n_layer", R, "num_layer (or num_hidden_layers)"},
      {"num_hidden_layers", R, "num_layer"},
      {"vocab_size", R, "vocab_size"},
      {"layer_norm_epsilon", R, "layernorm_eps"},
      {"apply_residual_connection_post_layernorm", R, "true refused"},
      {"tie_word_embeddings", R, "tied_embeddings"},
      {"n_inner", N, "unused by transformers (BLOOM's FFN is 4 x hidden_size)"},
      {"pretraining_tp", N, "splits the same products into slices"},
      {"slow_but_exact", N, "precision of the same products"},
      {"attention_softmax_in_fp32", N, "precision only"},
      {"masked_softmax_fusion", N, "Megatron-DeepSpeed kernel choice"},
      {"bias_dropout_fusion", N, "Megatron-DeepSpeed kernel choice"},
      {"skip_bias_add", N, "Megatron-DeepSpeed kernel choice"},
      {"skip_bias_add_qkv", N, "Megatron-DeepSpeed kernel choice"},
      {"offset_alibi", N, "unused by transformers"},
      {"seq_length", N, "training sequence length"},
      {"unk_token_id", N, "tokenizer id"},
      {"attention_dropout", N, kDropout},
      {"hidden_dropout", N, kDropout},
      {"initializer_range", N, "training initialisation"},
  };
  return k;
}

void read(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kBloom;
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
  c.layernorm_eps = eps_or(j, "layer_norm_epsilon", 1e-5, origin);
  c.tied_embeddings = bool_or(j, "tie_word_embeddings", true, origin);
  c.start_id = token_id_or(j, "bos_token_id", 1, origin);
  c.end_id = token_id_or(j, "eos_token_id", 2, origin);
  plan.extra_ini.emplace_back("model_variant", "bloom-pre");
}

class Hooks : public TensorHooks {
 public:
  bool layout_takes(const Source& s, std::string& name, std::vector<TensorView>&, ConversionPlan& plan) override {
    if (name != "lm_head.weight") return true;
    if (!plan.cfg.tied_embeddings) plan.jobs.push_back(replicated_job("model.lm_head.weight", s.t, s.origin));
    return false;  // tied: the same table as word_embeddings
  }
};

HfFamily bloom() {
  HfFamily f;
  f.model_type = "bloom";
  f.order = 50;
  f.display = "BLOOM";
  f.examples = "bigscience/bloom-560m to bigscience/bloom, bigscience/bloomz";
  f.keys = keys;
  f.prefixes = {"transformer."};
  f.qkv = QkvOrder::kHeadQkv;
  f.read = read;
  f.layout = [](HfCheckpoint&, const ModelConfig&) -> const ArchLayout& { return hf_bloom_layout(); };
  f.hooks = [] { return std::make_unique<Hooks>(); };
  return f;
}

}  // namespace

FTX_HF_FAMILY(bloom);

}  // namespace ftx::hf

// The layout table (declared in layout_table.h, where the converters' tests find it).
namespace ftx {

using hf::kFL;
using hf::kH;
using hf::kL;

const ArchLayout& hf_bloom_layout() {
  static const ArchLayout l{
      "hf-bloom",
      {
          {R"(word_embeddings\.weight)", "model.wte", Role::kReplicated, false},
          {R"(word_embeddings_layernorm\.(weight|bias))", "model.pre_decoder_layernorm.$1", Role::kReplicated, false},
          {R"(ln_f\.(weight|bias))", "model.final_layernorm.$1", Role::kReplicated, false},
          {kH + R"(input_layernorm\.(weight|bias))", kFL + "input_layernorm.$2", Role::kReplicated, false},
          {kH + R"(self_attention\.query_key_value\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true},
          {kH + R"(self_attention\.dense\.weight)", kFL + "attention.dense.weight", Role::kRow, true},
          {kH + R"(self_attention\.dense\.bias)", kFL + "attention.dense.bias", Role::kReplicated, false},
          {kH + R"(post_attention_layernorm\.(weight|bias))", kFL + "post_attention_layernorm.$2", Role::kReplicated, false},
          {kH + R"(mlp\.dense_h_to_4h\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumn, true},
          {kH + R"(mlp\.dense_4h_to_h\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, true},
          {kH + R"(mlp\.dense_4h_to_h\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
      },
      {R"(.*\.inv_freq)"}};
  return l;
}

}  // namespace ftx
