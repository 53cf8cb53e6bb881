// HuggingFace XGLM into FT's [gpt] section (no public FT converter; the layout is documented in
// ftx-convert-hf(1)): wpe = the sinusoidal table rows [2, 2 + max_position_embeddings), wte =
// embed_tokens · sqrt(d_model) when scale_embedding, lm_head = embed_tokens unscaled (tied when
// there is no scale); layers as for OPT.
#include <cmath>

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
      {"d_model", R, "head_num x size_per_head"},
      {"attention_heads", R, "head_num"},
      {"num_layers", R, "num_layer"},
      {"ffn_dim", R, "inter_size"},
      {"vocab_size", R, "vocab_size"},
      {"max_position_embeddings", R, "max_pos_seq_len (sinusoidal table rows)"},
      {"activation_function", R, "activation"},
      {"scale_embedding", R, "wte x sqrt(d_model)"},
      {"tie_word_embeddings", R, "tied_embeddings"},
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
  c.ft_variant = FtVariant::kXglm;
  c.model_name = name_or(j, "xglm", origin);
  const int64_t H = dim_key(j, "d_model", origin);
  set_heads(c, H, dim_key(j, "attention_heads", origin), origin);
  c.inter_size = dim_key(j, "ffn_dim", origin);
  c.num_layer = dim_key(j, "num_layers", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = dim_key(j, "max_position_embeddings", origin);
  c.position = PositionEmbedding::kSinusoidal;  // stored as model.wpe.bin
  c.position_offset = 2;
  c.activation = activation_key(j, "activation_function", "gelu", origin);
  c.layernorm_eps = 1e-5;
  c.embedding_scale = 1.0;  // folded into model.wte.bin
  // A scaled input table differs from the (unscaled) output table, so lm_head is written then.
  c.tied_embeddings = !bool_or(j, "scale_embedding", true, origin) && bool_or(j, "tie_word_embeddings", true, origin);
  c.start_id = token_id_or(j, "bos_token_id", 0, origin);
  c.end_id = token_id_or(j, "eos_token_id", 2, origin);
}

class Hooks : public EmbeddingHooks {
 public:
  void finish(ConversionPlan& plan) override {
    const Source* emb = embed();
    const Source* hd = head(emb);
    const ModelConfig& c = plan.cfg;
    const int64_t H = c.hidden();
    plan.jobs.push_back(replicated_job("model.wpe", sinusoidal_table(2, c.max_pos_seq_len, H, "model.wpe"),
                                       "sinusoidal positions (XGLM, offset 2)"));
    if (bool_or(in->config, "scale_embedding", true, in->cfg_path)) {
      const double scale = std::sqrt(static_cast<double>(H));
      plan.jobs.push_back(
          replicated_job("model.wte", scaled_tensor(emb->t, scale, "model.wte"), emb->origin + " x sqrt(d_model)"));
    } else {
      plan.jobs.push_back(replicated_job("model.wte", emb->t, emb->origin));
    }
    if (!c.tied_embeddings) plan.jobs.push_back(replicated_job("model.lm_head.weight", hd->t, hd->origin));
  }
};

HfFamily xglm() {
  HfFamily f;
  f.model_type = "xglm";
  f.order = 70;
  f.display = "XGLM";
  f.examples = "facebook/xglm-564M to facebook/xglm-7.5B";
  f.keys = keys;
  f.prefixes = {"model."};
  f.qkv = QkvOrder::kNone;
  f.read = read;
  f.layout = [](HfCheckpoint&, const ModelConfig&) -> const ArchLayout& { return hf_xglm_layout(); };
  f.hooks = [] { return std::make_unique<Hooks>(); };
  return f;
}

}  // namespace

FTX_HF_FAMILY(xglm);

}  // namespace ftx::hf

// The layout table (declared in layout_table.h, where the converters' tests find it).
namespace ftx {

const ArchLayout& hf_xglm_layout() {
  static const ArchLayout l = hf::fairseq_layout("hf-xglm", "layer_norm");
  return l;
}

}  // namespace ftx
