// HuggingFace OPT into FT's [gpt] section, as FT's huggingface_opt_convert.py writes it: wpe =
// embed_positions[2:]; q/k/v_proj fused (the layout's q/k/v parts); wte = embed_tokens ·
// project_inᵀ and lm_head = embed_tokens · project_out when word_embed_proj_dim differs from
// hidden_size, else both embed_tokens (FT always writes lm_head).
#include "formats/error.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/hf/fairseq.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = {
      {"hidden_size", R, "head_num x size_per_head"},
      {"num_attention_heads", R, "head_num"},
      {"num_hidden_layers", R, "num_layer"},
      {"ffn_dim", R, "inter_size"},
      {"vocab_size", R, "vocab_size"},
      {"max_position_embeddings", R, "max_pos_seq_len"},
      {"word_embed_proj_dim", R, "project_in/out folded into wte and lm_head"},
      {"do_layer_norm_before", R, "layernorm_type"},
      {"_remove_final_layer_norm", R, "has_post_decoder_layernorm"},
      {"activation_function", R, "activation"},
      {"enable_bias", R, "false refused"},
      {"layer_norm_elementwise_affine", R, "false refused"},
      {"tie_word_embeddings", R, "lm_head from embed_tokens or lm_head.weight"},
      {"dropout", N, kDropout},
      {"attention_dropout", N, kDropout},
      {"activation_dropout", N, kDropout},
      {"layerdrop", N, "training layer drop"},
      {"init_std", N, "training initialisation"},
  };
  return k;
}

void read(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kOpt;
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
  c.activation = activation_key(j, "activation_function", "relu", origin);
  c.layernorm_eps = 1e-5;     // nn.LayerNorm's default; OPT has no key for it
  c.tied_embeddings = false;  // FT's converter always writes lm_head
  c.start_id = token_id_or(j, "bos_token_id", 2, origin);
  c.end_id = token_id_or(j, "eos_token_id", 2, origin);
  plan.extra_ini.emplace_back("int8", "False");  // FT's OPT converter writes it
}

class Hooks : public EmbeddingHooks {
 public:
  bool layout_takes(const Source& s, std::string& n, std::vector<TensorView>& shards, ConversionPlan& plan) override {
    if (!EmbeddingHooks::layout_takes(s, n, shards, plan)) return false;
    if (n == "embed_positions.weight") {
      // OPTLearnedPositionalEmbedding: row = position + 2; FT stores rows [2:].
      TensorView& t = shards[0];
      FTX_CHECK(t.shape.size() == 2 && t.shape[0] > 2, s.origin, "embed_positions has shape " + shape_to_string(t.shape));
      t.offset += 2 * (t.strides.empty() ? t.shape[1] : t.strides[0]);
      t.shape[0] -= 2;
    }
    return true;
  }
  void finish(ConversionPlan& plan) override {
    const Source* emb = embed();
    const Source* hd = head(emb);
    const int64_t H = plan.cfg.hidden();
    const Source* pin = get("project_in.weight");
    const Source* pout = get("project_out.weight");
    const int64_t wp = dim_or(in->config, "word_embed_proj_dim", H, in->cfg_path);
    FTX_CHECK((pin != nullptr) == (wp != H) && (pout != nullptr) == (wp != H), in->folder,
              "word_embed_proj_dim " + std::to_string(wp) + " vs hidden_size " + std::to_string(H) +
                  ": project_in/project_out must exist exactly when they differ");
    if (pin) {
      // nn.Linear(word_embed_proj_dim, hidden) and back: the products below would take any inner
      // size, so a word_embed_proj_dim the tensors do not have is named here.
      const std::vector<int64_t> in_shape{H, wp}, out_shape{wp, H};
      FTX_CHECK(pin->t.shape == in_shape && pout->t.shape == out_shape, in->cfg_path,
                "word_embed_proj_dim = " + std::to_string(wp) + " does not match project_in " +
                    shape_to_string(pin->t.shape) + " and project_out " + shape_to_string(pout->t.shape) +
                    " (expected [hidden_size, word_embed_proj_dim] and its transpose)");
      // inputs: project_in(embed_tokens[id]); logits: embed_tokens · project_out(h).
      plan.jobs.push_back(replicated_job("model.wte", matmul_tensor(emb->t, pin->t, true, "model.wte"),
                                         emb->origin + " x " + pin->origin + "^T"));
      plan.jobs.push_back(replicated_job("model.lm_head.weight",
                                         matmul_tensor(hd->t, pout->t, false, "model.lm_head.weight"),
                                         hd->origin + " x " + pout->origin));
    } else {
      plan.jobs.push_back(replicated_job("model.wte", emb->t, emb->origin));
      plan.jobs.push_back(replicated_job("model.lm_head.weight", hd->t, hd->origin));
    }
  }
};

HfFamily opt() {
  HfFamily f;
  f.model_type = "opt";
  f.order = 60;
  f.display = "OPT";
  f.examples = "facebook/opt-125m to facebook/opt-66b (opt-350m: post-layernorm, word_embed_proj_dim)";
  f.keys = keys;
  f.prefixes = {"model.decoder.", "decoder."};
  f.qkv = QkvOrder::kNone;
  f.read = read;
  f.layout = [](HfCheckpoint&, const ModelConfig&) -> const ArchLayout& { return hf_opt_layout(); };
  f.hooks = [] { return std::make_unique<Hooks>(); };
  return f;
}

}  // namespace

FTX_HF_FAMILY(opt);

}  // namespace ftx::hf

// The layout table (declared in layout_table.h, where the converters' tests find it).
namespace ftx {

const ArchLayout& hf_opt_layout() {
  static const ArchLayout l = [] {
    ArchLayout a = hf::fairseq_layout("hf-opt", "final_layer_norm");
    a.rules.push_back({R"(embed_positions\.weight)", "model.wpe", Role::kReplicated, false});
    return a;
  }();
  return l;
}

}  // namespace ftx
