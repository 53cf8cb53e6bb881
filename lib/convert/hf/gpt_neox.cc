// HuggingFace GPT-NeoX into FT's [gptneox] section, as FT's huggingface_gptneox_convert.py writes
// it: query_key_value rows per head [n, 3, d] reordered to [3, n, d], half-split rotary on
// int(head size x rotary_pct) dims. With use_parallel_residual, mlp.attention.bias.sum =
// (attention.dense.bias + mlp.dense_4h_to_h.bias) / T, as FT's runtime adds it on every rank before
// the all-reduce. Without parallel residual FT's runtime adds the two biases once, after the
// all-reduce, so ftx writes them undivided (FT's converter divides them by T there: a bug for T > 1).
#include <regex>

#include "formats/error.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const std::vector<KeyRule>& keys() {
  static const std::vector<KeyRule> k = join(
      {
          {"hidden_size", R, "head_num x size_per_head"},
          {"num_attention_heads", R, "head_num"},
          {"num_hidden_layers", R, "num_layer"},
          {"intermediate_size", R, "inter_size"},
          {"vocab_size", R, "vocab_size"},
          {"max_position_embeddings", R, "max_pos_seq_len (recorded)"},
          {"hidden_act", R, "activation"},
          {"layer_norm_eps", R, "layernorm_eps"},
          {"use_parallel_residual", R, "use_gptj_residual"},
          {"attention_bias", R, "false refused"},
          {"tie_word_embeddings", R, "lm_head written from embed_in"},
          {"attention_dropout", N, kDropout},
          {"hidden_dropout", N, kDropout},
          {"classifier_dropout", N, "classification head"},
          {"initializer_range", N, "training initialisation"},
      },
      rope_keys("rotary_emb_base", "rotary_pct"));
  return k;
}

void read(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& origin = in.cfg_path;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kGptNeoX;
  c.model_name = name_or(j, "gptneox", origin);
  const int64_t H = dim_key(j, "hidden_size", origin);
  set_heads(c, H, dim_key(j, "num_attention_heads", origin), origin);
  c.inter_size = dim_key(j, "intermediate_size", origin);
  c.num_layer = dim_key(j, "num_hidden_layers", origin);
  c.vocab_size = dim_key(j, "vocab_size", origin);
  c.max_pos_seq_len = positions_or(j, "max_position_embeddings", origin);
  c.position = PositionEmbedding::kRotary;
  c.rotary_style = RotaryStyle::kHalfSplit;
  // FT: int(size_per_head * rotary_pct), Python's truncation. transformers 4.4x writes both the
  // old keys and their new names (partial_rotary_factor, rope_theta), 5.x only rope_parameters.
  const HfRope rope = read_rope(j, origin, {{"rotary_emb_base"}, {"rotary_pct"}, 10000.0, 0.25});
  c.rotary_dim = rotary_dims(rope, c.size_per_head, origin);
  c.rotary_base = rope.theta;
  c.rope_scaling = rope.scaling;
  FTX_CHECK(bool_or(j, "attention_bias", true, origin), origin,
            "attention_bias false is not supported (FT's GPT-NeoX has query_key_value and dense biases)");
  c.parallel_residual = bool_or(j, "use_parallel_residual", true, origin);
  // FT's GPT-NeoX always reads model.lm_head.weight: tied, it is written from embed_in.
  c.tied_embeddings = false;
  c.activation = activation_key(j, "hidden_act", "gelu", origin);
  c.layernorm_eps = eps_or(j, "layer_norm_eps", 1e-5, origin);
  c.start_id = token_id_or(j, "bos_token_id", 0, origin);
  c.end_id = token_id_or(j, "eos_token_id", 2, origin);
}

class Hooks : public TensorHooks {
 public:
  bool layout_takes(const Source& s, std::string& n, std::vector<TensorView>&, ConversionPlan& plan) override {
    if (bool_or(in->config, "tie_word_embeddings", false, in->cfg_path)) {
      if (n == "embed_out.weight") return false;  // pytorch_model.bin keeps the shared table twice
      if (n == "embed_in.weight") plan.jobs.push_back(replicated_job("model.lm_head.weight", s.t, s.origin));
    }
    if (plan.cfg.parallel_residual) {
      static const std::regex bias(R"(layers\.(\d+)\.(attention\.dense|mlp\.dense_4h_to_h)\.bias)");
      std::smatch m;
      if (std::regex_match(n, m, bias)) {
        auto& v = biases_[std::stoll(m[1])];
        v.resize(2, nullptr);
        v[m[2] == "attention.dense" ? 0 : 1] = &s;
        return false;
      }
    }
    return true;
  }
  // Parallel residual: one bias, divided by T (FT adds it on every rank before the reduce).
  void finish(ConversionPlan& plan) override {
    for (auto& [layer, v] : biases_) {
      const std::string name = "model.layers." + std::to_string(layer) + ".mlp.attention.bias.sum";
      FTX_CHECK(v[0] && v[1], in->folder,
                "layer " + std::to_string(layer) + " needs both attention.dense.bias and mlp.dense_4h_to_h.bias");
      plan.jobs.push_back(replicated_job(name, ft_divided_sum({v[0]->t, v[1]->t}, in->opt.tp, in->opt.dtype, name),
                                         v[0]->origin + " + " + v[1]->origin));
    }
  }

 private:
  std::map<int64_t, std::vector<const Source*>> biases_;  // layer -> attention, mlp bias
};

HfFamily gpt_neox() {
  HfFamily f;
  f.model_type = "gpt_neox";
  f.spellings = {"gptneox", "gpt-neox"};
  f.order = 40;
  f.display = "GPT-NeoX";
  f.examples = "EleutherAI/gpt-neox-20b, the EleutherAI/pythia models, databricks/dolly-v2";
  f.keys = keys;
  f.prefixes = {"gpt_neox."};
  f.qkv = QkvOrder::kHeadQkv;
  f.read = read;
  f.layout = [](HfCheckpoint&, const ModelConfig&) -> const ArchLayout& { return hf_gpt_neox_layout(); };
  f.hooks = [] { return std::make_unique<Hooks>(); };
  return f;
}

}  // namespace

FTX_HF_FAMILY(gpt_neox);

}  // namespace ftx::hf

// The layout table (declared in layout_table.h, where the converters' tests find it).
namespace ftx {

using hf::kFL;
using hf::kH;
using hf::kL;

const ArchLayout& hf_gpt_neox_layout() {
  static const ArchLayout l{
      "hf-gpt_neox",
      {
          {R"(embed_in\.weight)", "model.wte", Role::kReplicated, false},
          {R"(embed_out\.weight)", "model.lm_head.weight", Role::kReplicated, false},
          {R"(final_layer_norm\.(weight|bias))", "model.final_layernorm.$1", Role::kReplicated, false},
          {kL + R"(input_layernorm\.(weight|bias))", kFL + "input_layernorm.$2", Role::kReplicated, false},
          {kL + R"(attention\.query_key_value\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true},
          {kL + R"(attention\.dense\.weight)", kFL + "attention.dense.weight", Role::kRow, true},
          {kL + R"(attention\.dense\.bias)", kFL + "attention.dense.bias", Role::kReplicated, false},
          {kL + R"(post_attention_layernorm\.(weight|bias))", kFL + "post_attention_layernorm.$2", Role::kReplicated, false},
          {kL + R"(mlp\.dense_h_to_4h\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumn, true},
          {kL + R"(mlp\.dense_4h_to_h\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, true},
          {kL + R"(mlp\.dense_4h_to_h\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
      },
      {kL + R"(attention\.(bias|masked_bias))", R"(.*\.inv_freq)"}};
  return l;
}

}  // namespace ftx
