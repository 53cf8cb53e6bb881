// HuggingFace source adapter: config.json + pytorch_model.bin / *.safetensors (sharded or not).
// model_type gpt2 (Conv1D weights, [in, out]) and gpt_bigcode (StarCoder: nn.Linear, multi-query),
// plus the SantaCoder variant (q_attn + kv_attn Conv1D, multi-query). The other
// architectures (gptj, gpt_neox, bloom, opt, xglm) are planned by hf_arch_source.cc.
#include <map>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/hf_index.h"
#include "lib/convert/conversion.h"
#include "lib/convert/hf_arch.h"
#include "lib/convert/hf_common.h"
#include "lib/convert/hf_config.h"
#include "lib/convert/hf_llama.h"
#include "lib/convert/layout_table.h"
#include "lib/convert/source_names.h"

namespace ftx {

namespace {

using json = nlohmann::json;
using hf::bool_or;
using hf::dim_key;
using hf::dim_or;
using hf::int_or;
using hf::str_or;

const char* kSupported =
    "gpt2, gpt_bigcode (aliases: santacoder, starcoder), gptj, gpt_neox, bloom, opt, xglm, llama, mistral, qwen2";

std::string strip_prefix(const std::string& n) {
  for (const char* p : {"transformer.", "model.transformer."})
    if (n.rfind(p, 0) == 0) return n.substr(std::string(p).size());
  return n;
}

// GPT-2, GPTBigCode and SantaCoder.
ConversionPlan plan_hf_gpt2(const ConvertOptions& opt, const std::string& model_type, const json& j,
                            const std::string& folder, const std::string& cfg_path) {
  std::vector<NamedTensor> tensors = hf::load_weights(opt.in_path);
  std::map<std::string, TensorView> by_name;
  for (auto& t : tensors) by_name[strip_prefix(t.name)] = t.tensor;
  const bool santacoder = by_name.count("h.0.attn.q_attn.weight") > 0;

  ConversionPlan plan;
  plan.source_format = "hf";
  plan.source_path = opt.in_path;
  ModelConfig& c = plan.cfg;
  c.arch = model_type == "gpt2" && !santacoder ? Architecture::kGpt : Architecture::kGptBigCode;
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
  c.start_id = hf::token_id_or(j, "bos_token_id", 50256, cfg_path);
  c.end_id = hf::token_id_or(j, "eos_token_id", 50256, cfg_path, &plan.warnings);
  // Written always: FT's default would be 1e-6, HF GPT-2's is 1e-5.
  c.layernorm_eps = hf::eps_or(j, "layer_norm_epsilon", 1e-5, cfg_path);
  c.activation = hf::activation_key(j, "activation_function", "gelu_new", cfg_path);
  // Attention scores as GPT2Attention / GPTBigCodeAttention compute them by default: / sqrt(d).
  FTX_CHECK(bool_or(j, "scale_attn_weights", true, cfg_path), cfg_path,
            "scale_attn_weights false (attention scores not divided by sqrt(head size)) is not supported");
  FTX_CHECK(!bool_or(j, "scale_attn_by_inverse_layer_idx", false, cfg_path), cfg_path,
            "scale_attn_by_inverse_layer_idx true (scores also divided by the layer number) is not supported");
  const bool mqa = santacoder || (model_type == "gpt_bigcode" && bool_or(j, "multi_query", true, cfg_path));
  c.attention = mqa ? AttentionKind::kMultiQuery : AttentionKind::kMultiHead;
  c.kv_head_num = mqa ? 1 : c.head_num;
  // transformers 5 also writes num_key_value_heads (1 for multi_query, else n_head).
  const int64_t kv = int_or(j, "num_key_value_heads", c.kv_head_num, cfg_path);
  FTX_CHECK(kv == c.kv_head_num, cfg_path,
            "num_key_value_heads = " + std::to_string(kv) + " disagrees with multi_query (" + (mqa ? "1" : "n_head") +
                " key/value heads); grouped-query attention is not supported for " + model_type);
  c.tied_embeddings = bool_or(j, "tie_word_embeddings", true, cfg_path);

  // A SantaCoder layer's q_attn and kv_attn become one QKV tensor: two pieces on the last axis.
  const ArchLayout& layout = (model_type == "gpt_bigcode" && !santacoder) ? hf_gpt_bigcode_layout() : hf_gpt2_layout();
  JobContext ctx;
  ctx.heads_per_shard = c.head_num;
  ctx.head_dim = c.size_per_head;
  ctx.hidden = H;
  // GPT-2 and multi-query c_attn columns are already [Q | K | V]; a multi-head gpt_bigcode's are
  // per head [n, 3, d] (GPTBigCodeAttention views them as (heads, 3 * head_dim)), as in GPT-NeoX.
  ctx.qkv = model_type == "gpt_bigcode" && !mqa ? QkvOrder::kHeadQkv : QkvOrder::kQkvMajor;
  ctx.multi_query = mqa;
  NamePrefixes prefixes;
  for (auto& t : tensors) {
    std::string name = strip_prefix(t.name);
    prefixes.add(t.name, name);
    if (!layout_skips(layout, name)) check_float_weight(t.tensor, t.tensor.storage.origin + ":" + t.name);
    if (name == "lm_head.weight" && c.tied_embeddings) continue;  // the same table as wte
    std::vector<TensorView> shards{t.tensor};
    const auto q = name.find("attn.q_attn.");
    if (q != std::string::npos) {
      const std::string kv = name.substr(0, q) + "attn.kv_attn." + name.substr(q + 12);
      auto it = by_name.find(kv);
      FTX_CHECK(it != by_name.end(), folder, "tensor '" + name + "' has no matching '" + kv + "'");
      shards.push_back(it->second);
      name = name.substr(0, q) + "attn.c_attn." + name.substr(q + 12);
    } else if (name.find("attn.kv_attn.") != std::string::npos) {
      continue;  // consumed with its q_attn
    }
    auto m = match_layout(layout, name, folder);
    if (!m) continue;
    add_layout_jobs(*m, shards, t.tensor.storage.origin + ":" + t.name, ctx, plan.jobs);
  }
  if (!c.tied_embeddings)
    FTX_CHECK(by_name.count("lm_head.weight"), folder, "tie_word_embeddings is false but there is no lm_head.weight");
  plan.source_names = checkpoint_names(layout, std::move(prefixes));

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
  plan.extra_ini.emplace_back("model_type", model_type);
  hf::add_tokenizer_files(folder, plan);
  return plan;
}

}  // namespace

ConversionPlan plan_hf(const ConvertOptions& opt) {
  // -i is the model folder or one weight file in it (which is then the one converted).
  const std::string folder = hf_model_folder(opt.in_path);
  const std::string cfg_path = folder + "/config.json";
  json j;
  try {
    j = json::parse(read_text_file(cfg_path));
  } catch (const json::exception& e) {
    throw Error(cfg_path, std::string("bad JSON: ") + e.what());
  }
  FTX_CHECK(j.is_object(), cfg_path, "is not a JSON object");
  std::string model_type = opt.model.empty() ? str_or(j, "model_type", "", cfg_path) : opt.model;
  if (model_type.empty()) {
    const auto a = j.find("architectures");
    throw Error(cfg_path, "has no model_type" +
                              (a != j.end() && a->is_array() && !a->empty() ? " (architectures: " + a->dump() + ")" : "") +
                              "; --model TYPE names it (supported: " + kSupported + ")");
  }
  if (model_type == "starcoder" || model_type == "santacoder") model_type = "gpt_bigcode";
  const std::string arch = hf_arch_model_type(model_type), llama = hf_llama_model_type(model_type);
  if (model_type != "gpt2" && model_type != "gpt_bigcode" && arch.empty() && llama.empty())
    throw Error(cfg_path, "unsupported model_type '" + model_type + "'" +
                              (opt.model.empty() ? "" : " (from --model)") + " (supported: " + kSupported + ")");
  hf::refuse_common(j, cfg_path);
  const std::string canonical = !arch.empty() ? arch : !llama.empty() ? llama : model_type;
  ConversionPlan plan = !arch.empty()    ? plan_hf_arch(opt, arch, j, folder)
                        : !llama.empty() ? plan_hf_llama(opt, llama, j, folder)
                                         : plan_hf_gpt2(opt, model_type, j, folder, cfg_path);
  for (const std::string& k : hf::unknown_keys(j, canonical))
    plan.warnings.push_back(cfg_path + ": key '" + k + "' = " + j[k].dump(-1).substr(0, 60) +
                            " is not one ftx knows for " + canonical +
                            "; it was not read (see ftx-convert-hf(1) for the keys that are)");
  return plan;
}

}  // namespace ftx
