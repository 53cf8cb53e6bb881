// HuggingFace GPT-2 (Conv1D weights, [in, out]) and GPTBigCode (StarCoder: nn.Linear, multi-query),
// plus the SantaCoder variant (q_attn + kv_attn Conv1D, multi-query, model_type gpt2 or
// gpt_bigcode): one file, two families, as they share the config reader.
#include "formats/error.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

std::vector<KeyRule> gpt2_keys(bool bigcode) {
  std::vector<KeyRule> k = {
      {"n_embd", R, "head_num x size_per_head"},
      {"n_head", R, "head_num"},
      {"n_layer", R, "num_layer"},
      {"n_inner", R, "inter_size (null: 4 x n_embd)"},
      {"n_positions", R, "max_pos_seq_len"},
      {"n_ctx", N, "older copy of n_positions, unused by transformers"},
      {"vocab_size", R, "vocab_size"},
      {"activation_function", R, "activation (gelu, gelu_new, gelu_pytorch_tanh, relu, silu; others refused)"},
      {"layer_norm_epsilon", R, "layernorm_eps"},
      {"scale_attn_weights", R, "false refused"},
      {"scale_attn_by_inverse_layer_idx", R, "true refused"},
      {"tie_word_embeddings", R, "tied_embeddings"},
      {"reorder_and_upcast_attn", N, "precision of the attention product only; ftx computes it in fp32"},
      {"attn_pdrop", N, kDropout},
      {"embd_pdrop", N, kDropout},
      {"resid_pdrop", N, kDropout},
      {"summary_type", N, "sequence-summary head (classification), not the LM"},
      {"summary_use_proj", N, "sequence-summary head"},
      {"summary_activation", N, "sequence-summary head"},
      {"summary_proj_to_labels", N, "sequence-summary head"},
      {"summary_first_dropout", N, "sequence-summary head"},
      {"initializer_range", N, "training initialisation"},
  };
  if (bigcode) {
    k.push_back({"multi_query", R, "multi-query attention (kv_head_num 1)"});
    k.push_back({"num_key_value_heads", R, "5.x: 1 with multi_query, n_head without (others refused)"});
    k.push_back({"attention_softmax_in_fp32", N, "precision only; ftx's softmax is fp32"});
    k.push_back({"scale_attention_softmax_in_fp32", N, "precision only"});
  }
  return k;
}

const std::vector<KeyRule>& gpt2_table() {
  static const std::vector<KeyRule> k = gpt2_keys(false);
  return k;
}
const std::vector<KeyRule>& bigcode_table() {
  static const std::vector<KeyRule> k = gpt2_keys(true);
  return k;
}

bool santacoder(HfCheckpoint& in) { return in.find("h.0.attn.q_attn.weight") != nullptr; }

bool multi_query(HfCheckpoint& in) {
  return santacoder(in) || (in.model_type == "gpt_bigcode" && bool_or(in.config, "multi_query", true, in.cfg_path));
}

void read(HfCheckpoint& in, ConversionPlan& plan) {
  const json& j = in.config;
  const std::string& cfg_path = in.cfg_path;
  const std::string& model_type = in.model_type;
  const bool sc = santacoder(in);  // reads the tensor names first, as ftx always has for GPT-2
  ModelConfig& c = plan.cfg;
  c.ft_variant = model_type == "gpt2" && !sc ? FtVariant::kGpt : FtVariant::kGptBigCode;
  c.model_name = str_or(j, "_name_or_path", "gpt", cfg_path);
  if (c.model_name.empty()) c.model_name = "gpt";
  const int64_t H = dim_key(j, "n_embd", cfg_path);
  c.head_num = dim_key(j, "n_head", cfg_path);
  FTX_CHECK(H % c.head_num == 0, cfg_path,
            "n_embd " + std::to_string(H) + " is not a multiple of n_head " + std::to_string(c.head_num));
  c.size_per_head = H / c.head_num;
  // FT's huggingface_gpt_convert.py writes 4*n_embd and ignores n_inner; ftx uses n_inner.
  c.inter_size = dim_or(j, "n_inner", 4 * H, cfg_path);
  c.num_layer = dim_key(j, "n_layer", cfg_path);
  c.vocab_size = dim_key(j, "vocab_size", cfg_path);
  c.max_pos_seq_len = dim_key(j, "n_positions", cfg_path);
  c.start_id = token_id_or(j, "bos_token_id", 50256, cfg_path);
  c.end_id = token_id_or(j, "eos_token_id", 50256, cfg_path, &plan.warnings);
  // Written always: FT's default would be 1e-6, HF GPT-2's is 1e-5.
  c.layernorm_eps = eps_or(j, "layer_norm_epsilon", 1e-5, cfg_path);
  c.activation = activation_key(j, "activation_function", "gelu_new", cfg_path);
  // Attention scores as GPT2Attention / GPTBigCodeAttention compute them by default: / sqrt(d).
  FTX_CHECK(bool_or(j, "scale_attn_weights", true, cfg_path), cfg_path,
            "scale_attn_weights false (attention scores not divided by sqrt(head size)) is not supported");
  FTX_CHECK(!bool_or(j, "scale_attn_by_inverse_layer_idx", false, cfg_path), cfg_path,
            "scale_attn_by_inverse_layer_idx true (scores also divided by the layer number) is not supported");
  const bool mqa = multi_query(in);
  c.attention = mqa ? AttentionKind::kMultiQuery : AttentionKind::kMultiHead;
  c.kv_head_num = mqa ? 1 : c.head_num;
  // transformers 5 also writes num_key_value_heads (1 for multi_query, else n_head).
  const int64_t kv = int_or(j, "num_key_value_heads", c.kv_head_num, cfg_path);
  FTX_CHECK(kv == c.kv_head_num, cfg_path,
            "num_key_value_heads = " + std::to_string(kv) + " disagrees with multi_query (" + (mqa ? "1" : "n_head") +
                " key/value heads); grouped-query attention is not supported for " + model_type);
  c.tied_embeddings = bool_or(j, "tie_word_embeddings", true, cfg_path);

  // FT huggingface_gpt_convert.py writes these keys; TL adds the HF config's own.
  for (auto& kv : j.items()) {
    if (kv.key().empty() || kv.key()[0] == '_') continue;
    const json& v = kv.value();
    std::string s;
    if (v.is_string()) s = v.get<std::string>();
    else if (v.is_boolean()) s = v.get<bool>() ? "True" : "False";
    else if (v.is_null()) s = "None";
    else if (v.is_number_integer()) s = std::to_string(v.get<int64_t>());
    else continue;  // floats are written by to_ini in ftx's spelling; lists/dicts are skipped
    if (s.find('%') != std::string::npos || s.find('\n') != std::string::npos) continue;
    // activation_function is kept in the source's spelling (e.g. gelu_pytorch_tanh), as TL writes it.
    static const char* kOwn[] = {"n_embd", "n_head", "n_layer", "n_positions", "vocab_size", "multi_query",
                                 "model_type"};
    bool own = false;
    for (auto* o : kOwn) own = own || kv.key() == o;
    if (!own) plan.extra_ini.emplace_back(kv.key(), s);
  }
}

// A SantaCoder checkpoint (q_attn + kv_attn) uses GPT-2's Conv1D layout whatever its model_type.
const ArchLayout& layout(HfCheckpoint& in, const ModelConfig&) {
  return in.model_type == "gpt_bigcode" && !santacoder(in) ? hf_gpt_bigcode_layout() : hf_gpt2_layout();
}

void job_context(HfCheckpoint& in, const ModelConfig&, JobContext& ctx) {
  const bool mqa = multi_query(in);
  // GPT-2 and multi-query c_attn columns are already [Q | K | V]; a multi-head gpt_bigcode's are
  // per head [n, 3, d] (GPTBigCodeAttention views them as (heads, 3 * head_dim)), as in GPT-NeoX.
  ctx.qkv = in.model_type == "gpt_bigcode" && !mqa ? QkvOrder::kHeadQkv : QkvOrder::kQkvMajor;
  ctx.multi_query = mqa;
}

class Hooks : public TensorHooks {
 public:
  // A SantaCoder layer's q_attn and kv_attn become one QKV tensor: two pieces on the last axis.
  bool layout_takes(const Source& s, std::string& name, std::vector<TensorView>& shards, ConversionPlan& plan) override {
    if (name == "lm_head.weight" && plan.cfg.tied_embeddings) return false;  // the same table as wte
    const auto q = name.find("attn.q_attn.");
    if (q != std::string::npos) {
      const std::string kv = name.substr(0, q) + "attn.kv_attn." + name.substr(q + 12);
      const Source* k = in->find(kv);
      FTX_CHECK(k != nullptr, in->folder, "tensor '" + name + "' has no matching '" + kv + "'");
      shards.push_back(k->t);
      name = name.substr(0, q) + "attn.c_attn." + name.substr(q + 12);
      return true;
    }
    (void)s;
    return name.find("attn.kv_attn.") == std::string::npos;  // kv_attn: consumed with its q_attn
  }
  void finish(ConversionPlan& plan) override {
    if (!plan.cfg.tied_embeddings)
      FTX_CHECK(in->find("lm_head.weight"), in->folder, "tie_word_embeddings is false but there is no lm_head.weight");
  }
};

HfFamily family(const std::string& type, std::vector<std::string> aliases, int order, const std::string& display,
                const std::string& examples, const std::vector<KeyRule>& (*keys)()) {
  HfFamily f;
  f.model_type = type;
  f.aliases = std::move(aliases);
  f.order = order;
  f.display = display;
  f.examples = examples;
  f.keys = keys;
  f.prefixes = {"transformer.", "model.transformer."};
  f.read = read;
  f.layout = layout;
  f.job_context = job_context;
  f.hooks = [] { return std::make_unique<Hooks>(); };
  return f;
}

HfFamily gpt2() { return family("gpt2", {}, 10, "GPT-2", "gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2; bigcode/santacoder (q_attn + kv_attn, read as multi-query)", gpt2_table); }
HfFamily gpt_bigcode() {
  return family("gpt_bigcode", {"santacoder", "starcoder"}, 20, "GPTBigCode",
                "bigcode/starcoder, bigcode/starcoderbase, bigcode/gpt_bigcode-santacoder", bigcode_table);
}

}  // namespace

FTX_HF_FAMILY(gpt2);
FTX_HF_FAMILY(gpt_bigcode);

}  // namespace ftx::hf

// The layout table (declared in layout_table.h, where the converters' tests find it).
namespace ftx {

using hf::kFL;
using hf::kH;

namespace {

// GPT-2 and GPTBigCode share the names; only the weights' orientation differs.
ArchLayout hf_layout(const std::string& name, bool linear) {
  // GPT-2 Conv1D weights are already [in, out]; GPTBigCode uses nn.Linear ([out, in]).
  return ArchLayout{
      name,
      {
          {R"(wte\.weight)", "model.wte", Role::kReplicated, false},
          {R"(wpe\.weight)", "model.wpe", Role::kReplicated, false},
          {R"(lm_head\.weight)", "model.lm_head.weight", Role::kReplicated, false},
          {R"(ln_f\.(weight|bias))", "model.final_layernorm.$1", Role::kReplicated, false},
          {kH + R"(ln_1\.(weight|bias))", kFL + "input_layernorm.$2", Role::kReplicated, false},
          {kH + R"(attn\.c_attn\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, linear},
          {kH + R"(attn\.c_proj\.weight)", kFL + "attention.dense.weight", Role::kRow, linear},
          {kH + R"(attn\.c_proj\.bias)", kFL + "attention.dense.bias", Role::kReplicated, false},
          {kH + R"(ln_2\.(weight|bias))", kFL + "post_attention_layernorm.$2", Role::kReplicated, false},
          {kH + R"(mlp\.c_fc\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumn, linear},
          {kH + R"(mlp\.c_proj\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, linear},
          {kH + R"(mlp\.c_proj\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
      },
      {kH + R"(attn\.(bias|masked_bias))"}};
}

}  // namespace

const ArchLayout& hf_gpt2_layout() {
  static const ArchLayout l = hf_layout("hf-gpt2", false);
  return l;
}

const ArchLayout& hf_gpt_bigcode_layout() {
  static const ArchLayout l = hf_layout("hf-gpt_bigcode", true);
  return l;
}

}  // namespace ftx
