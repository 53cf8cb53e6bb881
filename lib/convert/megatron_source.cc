// Megatron-LM GPT source adapter: folder resolution, TP x PP shards,
// checkpoint_version QKV orders, args (or --head-num / --trained-tensor-parallel-size for v0).
#include <algorithm>
#include <cstdio>
#include <map>

#include "formats/error.h"
#include "formats/torch_checkpoint.h"
#include "formats/dcp_checkpoint.h"
#include "lib/convert/conversion.h"
#include "lib/convert/mcore_source.h"
#include "lib/convert/megatron_files.h"
#include "lib/convert/megatron_moe_source.h"
#include "lib/convert/shard_groups.h"

namespace ftx {


ConversionPlan plan_megatron(const ConvertOptions& opt) {
  // DeepSpeed's folders (Megatron-DeepSpeed MoE): the tag folder itself, or the save folder whose
  // `latest` file names it.
  if (is_megatron_moe_dir(opt.in_path)) return plan_megatron_moe(opt, opt.in_path);
  if (path_exists(opt.in_path + "/latest") && !is_directory(opt.in_path + "/latest")) {
    std::string tag = read_text_file(opt.in_path + "/latest");
    while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' ')) tag.pop_back();
    if (!tag.empty() && is_megatron_moe_dir(opt.in_path + "/" + tag)) return plan_megatron_moe(opt, opt.in_path + "/" + tag);
  }
  const std::string dir = resolve_megatron_iteration_dir(opt.in_path);
  if (is_dcp_dir(dir)) return plan_mcore_megatron_dist(opt, dir);
  std::vector<MegatronShardFile> files = find_megatron_shards(dir);
  if (files.empty())
    for (const auto& n : list_dir(dir))  // a torch_dist folder missing its .metadata is no legacy one
      if (n.size() > 7 && n.compare(n.size() - 7, 7, ".distcp") == 0)
        throw Error(dir, "holds torch_dist chunk files (" + n + ") but no .metadata, which maps the tensors to them: "
                         "the distributed checkpoint is incomplete");
  FTX_CHECK(!files.empty(), dir, "no mp_rank_XX/model_optim_rng.pt shards found");
  std::map<std::pair<int64_t, int64_t>, const MegatronShardFile*> by_rank;
  for (auto& f : files) by_rank[{f.tp, f.pp}] = &f;
  auto first_it = by_rank.find({0, 0});
  FTX_CHECK(first_it != by_rank.end(), dir, "has no shard for tensor parallel rank 0 (mp_rank_00)");

  ValuePtr root0 = load_torch_checkpoint(first_it->second->path);
  // Before anything is judged by the model's args (a swiglu refusal would blame the wrong thing).
  FTX_CHECK(!root0->get("model0"), first_it->second->path, "virtual pipeline checkpoints (model0, ...) are not supported");
  if (is_mcore_state_dict(root0->get("model"))) return plan_mcore_megatron_legacy(opt, dir, files, root0);
  ValuePtr args = root0->get("args");
  if (args && !args->is_dict()) args = nullptr;
  double version = 0;
  if (auto v = root0->get("checkpoint_version")) version = v->kind == Value::Kind::kFloat ? v->f : double(v->i);

  int64_t max_tp = 0, max_pp = 0;
  for (auto& f : files) max_tp = std::max(max_tp, f.tp + 1), max_pp = std::max(max_pp, f.pp + 1);
  int64_t Tt = megatron_arg_int(args, "tensor_model_parallel_size", megatron_arg_int(args, "model_parallel_size", 0));
  if (Tt == 0) Tt = opt.trained_tp;
  FTX_CHECK(Tt > 0 || max_tp == 1, dir,
            "the checkpoint has no args: pass --trained-tensor-parallel-size (and --head-num)");
  if (Tt == 0) Tt = 1;
  const int64_t PP = megatron_arg_int(args, "pipeline_model_parallel_size", max_pp);
  for (int64_t p = 0; p < PP; ++p)
    for (int64_t t = 0; t < Tt; ++t) {
      if (by_rank.count({t, p})) continue;
      throw Error(dir, "missing shard " + megatron_shard_name(t, p, PP) + "/model_optim_rng.pt (the checkpoint has " +
                           std::to_string(Tt) + " tensor parallel x " + std::to_string(PP) + " pipeline shards)");
    }

  // Features ftx (like FT) cannot represent for Megatron GPT: say so instead of writing garbage.
  if (args) {
    auto pe = megatron_arg(args, "position_embedding_type");
    FTX_CHECK(!megatron_arg_bool(args, "swiglu", false), dir, "swiglu Megatron models are not supported");
    FTX_CHECK(!(pe && pe->kind == Value::Kind::kString && pe->str == "rope") &&
                  !megatron_arg_bool(args, "use_rotary_position_embeddings", false),
              dir, "rotary (rope) Megatron models are not supported");
    FTX_CHECK(!megatron_arg_bool(args, "group_query_attention", false), dir, "grouped-query attention is not supported");
    FTX_CHECK(!megatron_arg_bool(args, "untie_embeddings_and_output_weights", false), dir,
              "untied input/output embeddings are not supported");
    FTX_CHECK(megatron_arg_bool(args, "add_bias_linear", true), dir, "bias-free (add_bias_linear=False) models are not supported");
  }

  // Load every shard; layers of pipeline stage p get the global offset p * (num_layers / PP).
  std::vector<std::pair<MegatronShardFile, ValuePtr>> loaded;
  int64_t layers_arg = megatron_arg_int(args, "num_layers", 0);
  ShardGroups groups(Tt);
  int64_t layers_per_stage = -1;
  for (int64_t p = 0; p < PP; ++p) {
    for (int64_t t = 0; t < Tt; ++t) {
      const MegatronShardFile& f = *by_rank[{t, p}];
      ValuePtr root = (t == 0 && p == 0) ? root0 : load_torch_checkpoint(f.path);
      ValuePtr model = root->get("model");
      if (!model && root->get("model0")) throw Error(f.path, "virtual pipeline checkpoints (model0, ...) are not supported");
      FTX_CHECK(model && model->is_dict(), f.path, "has no 'model' state dict");
      ValuePtr lm = model->get("language_model");
      FTX_CHECK(lm && lm->is_dict(), f.path, "has no model.language_model (is this a Megatron GPT checkpoint?)");
      std::vector<NamedTensor> tensors;
      std::vector<NamedValue> others;
      flatten_value(lm, "", tensors, others);
      // Local layers of this stage, to compute the stage's global offset when args are absent.
      int64_t local_layers = 0;
      std::vector<std::pair<std::string, TensorView>> named;
      for (auto& nt : tensors) {
        std::string n = nt.name;
        for (const char* pre : {"encoder.", "transformer."})
          if (n.rfind(pre, 0) == 0) n = n.substr(std::string(pre).size());
        if (n.rfind("layers.", 0) == 0) {
          size_t end = n.find('.', 7);
          try {
            local_layers = std::max<int64_t>(local_layers, std::stoll(n.substr(7, end - 7)) + 1);
          } catch (const std::exception&) {
          }
        }
        named.emplace_back(n, nt.tensor);
      }
      if (layers_per_stage < 0) layers_per_stage = layers_arg > 0 ? layers_arg / PP : local_layers;
      for (auto& nt : named) groups.add(nt.first, p * layers_per_stage, t, nt.second, f.dir_name);
      loaded.emplace_back(f, root);
    }
  }

  ConversionPlan plan;
  plan.source_format = "megatron";
  plan.source_path = opt.in_path;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kGpt;
  c.model_name = "gpt";
  FTX_CHECK(groups.has("embedding.word_embeddings.weight"), dir, "has no embedding.word_embeddings.weight");
  FTX_CHECK(!groups.has("output_layer.weight"), dir, "has an output_layer (untied embeddings are not supported)");
  const auto& wte = groups.shards("embedding.word_embeddings.weight");
  FTX_CHECK(wte[0].shape.size() == 2, dir, "word embeddings are not 2-D: " + shape_to_string(wte[0].shape));
  const int64_t H = megatron_arg_int(args, "hidden_size", wte[0].shape[1]);
  c.head_num = megatron_arg_int(args, "num_attention_heads", opt.head_num);
  FTX_CHECK(c.head_num > 0, dir, "the checkpoint has no args: pass --head-num");
  FTX_CHECK(opt.head_num <= 0 || opt.head_num == c.head_num, dir,
            "--head-num " + std::to_string(opt.head_num) + " disagrees with the checkpoint's num_attention_heads " +
                std::to_string(c.head_num) + " (--head-num is for checkpoints without args)");
  FTX_CHECK(H % c.head_num == 0, dir,
            "hidden size " + std::to_string(H) + " is not a multiple of the head count " + std::to_string(c.head_num));
  FTX_CHECK(c.head_num % Tt == 0, dir, "head count " + std::to_string(c.head_num) +
                                           " is not divisible by the trained tensor parallel size " + std::to_string(Tt));
  c.size_per_head = H / c.head_num;
  c.inter_size = megatron_arg_int(args, "ffn_hidden_size", 4 * H);
  c.num_layer = layers_arg > 0 ? layers_arg : groups.num_layers();
  FTX_CHECK(c.num_layer % PP == 0, dir, "num_layers " + std::to_string(c.num_layer) +
                                            " is not divisible by the pipeline size " + std::to_string(PP));
  int64_t vocab_rows = 0;
  for (auto& s : wte) vocab_rows += s.shape.empty() ? 0 : s.shape[0];
  c.vocab_size = megatron_arg_int(args, "padded_vocab_size", vocab_rows);
  if (groups.has("embedding.position_embeddings.weight")) {
    const auto& wpe = groups.shards("embedding.position_embeddings.weight");
    c.max_pos_seq_len = megatron_arg_int(args, "max_position_embeddings", wpe[0].shape.empty() ? 0 : wpe[0].shape[0]);
  } else {
    c.position = PositionEmbedding::kNone;
  }
  // Megatron's LayerNorm default is 1e-5; FT's converter assumes 1e-6 for v0 (no args). ftx writes
  // the value the model was trained with when it is known, and Megatron's default otherwise.
  auto eps = megatron_arg(args, "layernorm_epsilon");
  c.layernorm_eps = (eps && eps->kind == Value::Kind::kFloat) ? eps->f : 1e-5;
  c.activation = megatron_arg_bool(args, "openai_gelu", false) ? Activation::kGeluTanh : Activation::kGelu;
  c.kv_head_num = c.head_num;

  JobContext ctx;
  ctx.heads_per_shard = c.head_num / Tt;
  ctx.head_dim = c.size_per_head;
  ctx.hidden = H;
  // QKV row order per checkpoint_version (ML fix_query_key_value_ordering). FT reorders only v3 and
  // so mishandles v1 ([n_l, d, 3]) and v2 ([n_l, 3, d]); ftx reorders every version correctly.
  if (version < 1.0) ctx.qkv = QkvOrder::kQkvMajor;
  else if (version < 2.0) ctx.qkv = QkvOrder::kHeadDimQkv;
  else ctx.qkv = QkvOrder::kHeadQkv;
  groups.build_jobs(megatron_gpt_layout(), ctx, dir, plan.jobs);

  add_megatron_side_files(plan, opt, args);
  // Keep every loaded checkpoint alive as long as the plan (the views point into their mappings).
  (void)loaded;
  return plan;
}

}  // namespace ftx
