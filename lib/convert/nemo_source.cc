// NeMo GPT source adapter: a .nemo archive (tar or tar.gz) or its extracted folder;
// model_config.yaml decides sizes, bias, activation (swiglu -> gated FFN), normalization
// (layernorm1p), position embedding (learned / rope) and TP x PP; tokenizer files are copied.
#include <algorithm>
#include <cstdio>
#include <map>

#include <sentencepiece_processor.h>
#include <yaml-cpp/yaml.h>

#include "formats/error.h"
#include "formats/tar_archive.h"
#include "formats/torch_checkpoint.h"
#include "lib/convert/conversion.h"
#include "lib/convert/mcore_source.h"
#include "lib/convert/nemo_files.h"
#include "lib/convert/yaml_fields.h"
#include "lib/convert/shard_groups.h"

namespace ftx {

namespace {

// "nemo:<f>" and "/artifacts/<f>" name an archive member by suffix; else fall back to a pattern.
std::string find_tokenizer_file(const NemoFiles& files, const YAML::Node& tok, const char* key, const char* fallback) {
  std::string v = yaml_or<std::string>(tok, key, "");
  for (const char* pre : {"nemo:", "/artifacts/"})
    if (v.rfind(pre, 0) == 0) v = v.substr(std::string(pre).size());
  if (!v.empty()) {
    auto slash = v.find_last_of('/');
    if (slash != std::string::npos) v = v.substr(slash + 1);
    auto m = files.glob("*" + v);
    if (!m.empty()) return m[0];
  }
  auto m = files.glob(fallback);
  return m.empty() ? std::string() : m[0];
}

std::string ext_of(const std::string& n) {
  auto slash = n.find_last_of('/');
  auto dot = n.find_last_of('.');
  return (dot == std::string::npos || (slash != std::string::npos && dot < slash)) ? "" : n.substr(dot);
}

// Tokenizer: copied as tokenizer<ext>, vocab<ext>, merges<ext>; start/end ids from it.
void add_nemo_tokenizer(ConversionPlan& plan, const NemoFiles& files, const YAML::Node& y, const ConvertOptions& opt) {
  YAML::Node tok = y["tokenizer"];
  ModelConfig& c = plan.cfg;
  c.start_id = c.end_id = 50256;
  std::string vocab_text;
  auto copy = [&](const std::string& override_path, const std::string& member, const std::string& stem) {
    if (!override_path.empty()) {
      auto mf = MappedFile::open(override_path);
      plan.copy_files.emplace_back(stem + ext_of(override_path), Storage{mf->data(), mf->size(), mf, mf, 0, override_path});
      return plan.copy_files.back().second;
    }
    if (member.empty()) return Storage{};
    plan.copy_files.emplace_back(stem + ext_of(member), files.get(member));
    return plan.copy_files.back().second;
  };
  Storage model_file = copy("", find_tokenizer_file(files, tok, "model", "*.model"), "tokenizer");
  Storage vocab_file = copy(opt.vocab_path, find_tokenizer_file(files, tok, "vocab_file", "*vocab*"), "vocab");
  copy(opt.merges_path, find_tokenizer_file(files, tok, "merge_file", "*merge*.txt"), "merges");
  if (vocab_file.data) {
    int64_t id = endoftext_id(std::string(reinterpret_cast<const char*>(vocab_file.data), vocab_file.nbytes));
    if (id >= 0) c.start_id = c.end_id = id;
  } else if (model_file.data) {
    sentencepiece::SentencePieceProcessor sp;
    auto st = sp.LoadFromSerializedProto(
        absl::string_view(reinterpret_cast<const char*>(model_file.data), model_file.nbytes));
    FTX_CHECK(st.ok(), model_file.origin, "cannot load the SentencePiece model: " + st.ToString());
    c.start_id = sp.bos_id();
    c.end_id = sp.eos_id();
  }
}

}  // namespace

ConversionPlan plan_nemo(const ConvertOptions& opt) {
  FTX_CHECK(path_exists(opt.in_path), opt.in_path, "does not exist");
  NemoFiles files(opt.in_path);

  std::vector<std::string> yamls;
  for (auto& n : files.names())
    if (n == "model_config.yaml" || (n.size() > 18 && n.compare(n.size() - 18, 18, "/model_config.yaml") == 0))
      yamls.push_back(n);
  FTX_CHECK(yamls.size() == 1, opt.in_path,
            yamls.empty() ? "has no model_config.yaml" : "has several model_config.yaml members");
  const std::string yorigin = files.origin(yamls[0]);
  YAML::Node y;
  try {
    Storage s = files.get(yamls[0]);
    y = YAML::Load(std::string(reinterpret_cast<const char*>(s.data), s.nbytes));
  } catch (const YAML::Exception& e) {
    throw Error(yorigin, std::string("bad YAML: ") + e.what());
  }
  if (y["model"] && y["model"].IsMap() && !y["num_layers"]) y = y["model"];
  if (is_mcore_nemo(y, files)) {
    ConversionPlan plan;
    plan.source_format = "nemo";
    plan.source_path = opt.in_path;
    plan_mcore_nemo_weights(files, y, yorigin, plan);
    add_nemo_tokenizer(plan, files, y, opt);
    return plan;
  }

  const int64_t Tt = yaml_or<int64_t>(y, "tensor_model_parallel_size", 1);
  const int64_t PP = yaml_or<int64_t>(y, "pipeline_model_parallel_size", 1);
  ConversionPlan plan;
  plan.source_format = "nemo";
  plan.source_path = opt.in_path;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kGpt;
  c.model_name = "gpt";
  const int64_t H = yaml_int(y, "hidden_size", yorigin);
  c.head_num = yaml_int(y, "num_attention_heads", yorigin);
  FTX_CHECK(c.head_num > 0 && H % c.head_num == 0, yorigin, "hidden_size is not a multiple of num_attention_heads");
  FTX_CHECK(c.head_num % Tt == 0, yorigin, "num_attention_heads " + std::to_string(c.head_num) +
                                               " is not divisible by tensor_model_parallel_size " + std::to_string(Tt));
  const int64_t groups_q = yaml_or<int64_t>(y, "num_query_groups", c.head_num);
  FTX_CHECK(groups_q == c.head_num, yorigin, "grouped-query attention (num_query_groups) is not supported");
  c.size_per_head = H / c.head_num;
  c.inter_size = yaml_int(y, "ffn_hidden_size", yorigin);
  c.num_layer = yaml_int(y, "num_layers", yorigin);
  FTX_CHECK(c.num_layer % PP == 0, yorigin, "num_layers is not divisible by pipeline_model_parallel_size");
  c.layernorm_eps = yaml_or<double>(y, "layernorm_epsilon", 1e-5);
  c.has_bias = yaml_or<bool>(y, "bias", true);
  c.activation = activation_from_name(yaml_or<std::string>(y, "activation", "gelu"));
  const std::string norm = yaml_or<std::string>(y, "normalization", "layernorm");
  FTX_CHECK(norm == "layernorm" || norm == "layernorm1p", yorigin,
            "normalization '" + norm + "' is not supported (layernorm, layernorm1p)");
  const std::string pos = yaml_or<std::string>(y, "position_embedding_type", "learned_absolute");
  if (pos == "rope") {
    c.position = PositionEmbedding::kRotary;
    c.rotary_style = RotaryStyle::kHalfSplit;
    c.rotary_dim = static_cast<int64_t>(c.size_per_head * yaml_or<double>(y, "rotary_percentage", 1.0));
    c.rotary_base = yaml_or<double>(y, "rotary_base", 10000.0);
    c.max_pos_seq_len = yaml_or<int64_t>(y, "max_position_embeddings", 0);
  } else {
    FTX_CHECK(pos == "learned_absolute", yorigin, "position_embedding_type '" + pos + "' is not supported");
    c.max_pos_seq_len = yaml_int(y, "max_position_embeddings", yorigin);
  }
  c.tied_embeddings = yaml_or<bool>(y, "share_embeddings_and_output_weights", true);
  c.kv_head_num = c.head_num;

  // Weights: model_weights.ckpt (TP=PP=1), mp_rank_XX/..., or tp_rank_XX_pp_rank_XXX/...
  ShardGroups groups(Tt);
  bool mcore_names = false;  // model.decoder.* / model.embedding.*: a Megatron Core model
  for (int64_t p = 0; p < PP; ++p) {
    for (int64_t t = 0; t < Tt; ++t) {
      const std::string member = nemo_weights_member(files, t, p, Tt, PP);
      ValuePtr root = load_torch_checkpoint(files.get(member));
      if (auto sd = root->get("state_dict"); sd && sd->is_dict()) root = sd;
      std::vector<NamedTensor> tensors;
      std::vector<NamedValue> others;
      flatten_value(root, "", tensors, others);
      const std::string shard = member.substr(0, member.find('/'));
      for (auto& nt : tensors) {
        std::string n = nt.name;
        mcore_names |= n.rfind("model.decoder.", 0) == 0 || n.rfind("model.embedding.", 0) == 0;
        const std::string pre = "model.language_model.";
        if (n.rfind(pre, 0) != 0) continue;  // e.g. prompt tables are converted separately
        n = n.substr(pre.size());
        for (const char* sub : {"encoder.", "transformer."})
          if (n.rfind(sub, 0) == 0) n = n.substr(std::string(sub).size());
        groups.add(n, p * (c.num_layer / PP), t, nt.tensor, shard);
      }
    }
  }
  FTX_CHECK(groups.has("embedding.word_embeddings.weight") || !mcore_names, opt.in_path,
            "model_config.yaml says mcore_gpt: false, but the weights have Megatron Core names "
            "(model.decoder.layers...): set mcore_gpt: true");
  FTX_CHECK(groups.has("embedding.word_embeddings.weight"), opt.in_path, "has no word embeddings");
  int64_t vocab_rows = 0;
  for (auto& s : groups.shards("embedding.word_embeddings.weight")) vocab_rows += s.shape.empty() ? 0 : s.shape[0];
  c.vocab_size = vocab_rows;
  if (groups.has("output_layer.weight")) c.tied_embeddings = false;

  JobContext ctx;
  ctx.heads_per_shard = c.head_num / Tt;
  ctx.head_dim = c.size_per_head;
  ctx.hidden = H;
  ctx.qkv = QkvOrder::kHeadQkv;  // NeMo is always [n_l, 3, d]
  ctx.gated = c.activation.is_gated();
  ctx.layernorm1p = norm == "layernorm1p";
  groups.build_jobs(megatron_gpt_layout(), ctx, opt.in_path, plan.jobs);

  add_nemo_tokenizer(plan, files, y, opt);
  return plan;
}

}  // namespace ftx
