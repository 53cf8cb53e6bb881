// HuggingFace GPT-J into FT's [gptj] section, as FT's huggingface_gptj_ckpt_convert.py writes it:
// q_proj, k_proj and v_proj fused into one [H, 3H] query_key_value (the layout's q/k/v parts),
// interleaved rotary on rotary_dim dims, attention and MLP in parallel on ln_1.
#include "formats/error.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = {
      {"n_embd", R, "head_num x size_per_head"},
      {"n_head", R, "head_num"},
      {"n_layer", R, "num_layer"},
      {"n_inner", R, "inter_size (null: 4 x n_embd)"},
      {"n_positions", R, "max_pos_seq_len"},
      {"vocab_size", R, "vocab_size"},
      {"rotary_dim", R, "rotary_embedding (null: the whole head)"},
      {"activation_function", R, "activation"},
      {"layer_norm_epsilon", R, "layernorm_eps"},
      {"tie_word_embeddings", R, "true refused (GPT-J's lm_head has its own weight and bias)"},
      {"attn_pdrop", N, kDropout},
      {"embd_pdrop", N, kDropout},
      {"resid_pdrop", N, kDropout},
      {"initializer_range", N, "training initialisation"},
  };
  return k;
}

void read(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kGptJ;
  c.model_name = name_or(j, "gptj", origin);
  const int64_t H = dim_key(j, "n_embd", origin);
  set_heads(c, H, dim_key(j, "n_head", origin), origin);
  c.inter_size = dim_or(j, "n_inner", 4 * H, origin);  // HF: n_inner null = 4·n_embd
  c.num_layer = dim_key(j, "n_layer", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = positions_or(j, "n_positions", origin);
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
  c.activation = activation_key(j, "activation_function", "gelu_new", origin);
  c.layernorm_eps = eps_or(j, "layer_norm_epsilon", 1e-5, origin);
  c.start_id = token_id_or(j, "bos_token_id", 50256, origin);
  c.end_id = token_id_or(j, "eos_token_id", 50256, origin);
}

HfFamily gptj() {
  HfFamily f;
  f.model_type = "gptj";
  f.spellings = {"gpt-j"};
  f.order = 30;
  f.display = "GPT-J";
  f.examples = "EleutherAI/gpt-j-6b";
  f.keys = keys;
  f.prefixes = {"transformer."};
  f.qkv = QkvOrder::kNone;
  f.read = read;
  f.layout = [](HfCheckpoint&, const ModelConfig&) -> const ArchLayout& { return hf_gptj_layout(); };
  return f;
}

}  // namespace

FTX_HF_FAMILY(gptj);

}  // namespace ftx::hf

// The layout table (declared in layout_table.h, where the converters' tests find it).
namespace ftx {

using hf::kFL;
using hf::kH;
using hf::kL;

const ArchLayout& hf_gptj_layout() {
  static const ArchLayout l{
      "hf-gptj",
      {
          {R"(wte\.weight)", "model.wte", Role::kReplicated, false},
          {R"(ln_f\.(weight|bias))", "model.final_layernorm.$1", Role::kReplicated, false},
          {R"(lm_head\.(weight|bias))", "model.lm_head.$1", Role::kReplicated, false},
          {kH + R"(ln_1\.(weight|bias))", kFL + "input_layernorm.$2", Role::kReplicated, false},
          {kH + R"(attn\.q_proj\.weight)", kFL + "attention.query_key_value.weight", Role::kQkv, true, 0},
          {kH + R"(attn\.k_proj\.weight)", kFL + "attention.query_key_value.weight", Role::kQkv, true, 1},
          {kH + R"(attn\.v_proj\.weight)", kFL + "attention.query_key_value.weight", Role::kQkv, true, 2},
          {kH + R"(attn\.out_proj\.weight)", kFL + "attention.dense.weight", Role::kRow, true},
          {kH + R"(mlp\.fc_in\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumn, true},
          {kH + R"(mlp\.fc_out\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, true},
          {kH + R"(mlp\.fc_out\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
      },
      {kH + R"(attn\.(bias|masked_bias|embed_positions))", R"(.*\.inv_freq)"}};
  return l;
}

}  // namespace ftx
