// Megatron-LM GPT source adapter (spec §3.6-§3.8, §4): folder resolution, TP x PP shards,
// checkpoint_version QKV orders, args (or --head-num / --trained-tensor-parallel-size for v0).
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>

#include "formats/error.h"
#include "formats/torch_checkpoint.h"
#include "lib/convert/conversion.h"
#include "lib/convert/shard_groups.h"

namespace ftx {

namespace {

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

struct ShardFile {
  int64_t tp, pp;
  std::string dir_name, path;
};

std::vector<ShardFile> find_shards(const std::string& dir) {
  static const std::regex mp(R"(mp_rank_(\d{2})(?:_(\d{3}))?)");
  static const std::regex tpp(R"(tp_rank_(\d{2})_pp_rank_(\d{3}))");
  std::vector<ShardFile> out;
  for (auto& n : list_dir(dir)) {
    std::smatch m;
    int64_t tp, pp = 0;
    if (std::regex_match(n, m, mp)) {
      tp = std::stoll(m[1]);
      if (m[2].matched) pp = std::stoll(m[2]);
    } else if (std::regex_match(n, m, tpp)) {
      tp = std::stoll(m[1]);
      pp = std::stoll(m[2]);
    } else {
      continue;
    }
    for (const char* f : {"model_optim_rng.pt", "model_rng.pt"}) {
      std::string p = dir + "/" + n + "/" + f;
      if (path_exists(p)) {
        out.push_back({tp, pp, n, p});
        break;
      }
    }
  }
  return out;
}

// The iteration folder: ROOT (with latest_checkpointed_iteration.txt), ITER itself, or a parent
// holding only `release/` or `iter_XXXXXXX/` folders.
std::string resolve_iteration_dir(const std::string& in) {
  FTX_CHECK(is_directory(in), in, "not a folder (expected a Megatron checkpoint folder)");
  const std::string tracker = in + "/latest_checkpointed_iteration.txt";
  if (path_exists(tracker)) {
    std::string it = trim(read_text_file(tracker));
    if (it == "release") return in + "/release";
    char buf[32];
    try {
      std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(std::stoll(it)));
    } catch (const std::exception&) {
      throw Error(tracker, "expected an iteration number or 'release', found '" + it + "'");
    }
    std::string dir = in + "/" + buf;
    FTX_CHECK(is_directory(dir), tracker, "names iteration '" + it + "' but " + dir + " does not exist");
    return dir;
  }
  if (!find_shards(in).empty()) return in;
  std::vector<std::string> iters;
  for (auto& n : list_dir(in))
    if ((n == "release" || n.rfind("iter_", 0) == 0) && is_directory(in + "/" + n)) iters.push_back(n);
  FTX_CHECK(!iters.empty(), in, "no mp_rank_XX, tp_rank_XX_pp_rank_XXX, release/ or iter_XXXXXXX/ folders found");
  FTX_CHECK(iters.size() == 1, in, "holds several iterations and no latest_checkpointed_iteration.txt; pass one of them");
  return in + "/" + iters[0];
}

ValuePtr arg(const ValuePtr& args, const char* key) { return args ? args->get(key) : nullptr; }
int64_t arg_int(const ValuePtr& args, const char* key, int64_t def) {
  auto v = arg(args, key);
  return (v && v->kind == Value::Kind::kInt) ? v->i : def;
}
bool arg_bool(const ValuePtr& args, const char* key, bool def) {
  auto v = arg(args, key);
  return (v && v->kind == Value::Kind::kBool) ? v->b : def;
}

}  // namespace

ConversionPlan plan_megatron(const ConvertOptions& opt) {
  const std::string dir = resolve_iteration_dir(opt.in_path);
  for (auto& n : list_dir(dir))
    FTX_CHECK(n.size() < 7 || n.compare(n.size() - 7, 7, ".distcp") != 0, dir,
              "is a torch_dist (mcore distributed) checkpoint, which is not supported");
  std::vector<ShardFile> files = find_shards(dir);
  FTX_CHECK(!files.empty(), dir, "no mp_rank_XX/model_optim_rng.pt shards found");
  std::map<std::pair<int64_t, int64_t>, const ShardFile*> by_rank;
  for (auto& f : files) by_rank[{f.tp, f.pp}] = &f;
  auto first_it = by_rank.find({0, 0});
  FTX_CHECK(first_it != by_rank.end(), dir, "has no shard for tensor parallel rank 0 (mp_rank_00)");

  ValuePtr root0 = load_torch_checkpoint(first_it->second->path);
  ValuePtr args = root0->get("args");
  if (args && !args->is_dict()) args = nullptr;
  double version = 0;
  if (auto v = root0->get("checkpoint_version")) version = v->kind == Value::Kind::kFloat ? v->f : double(v->i);

  int64_t max_tp = 0, max_pp = 0;
  for (auto& f : files) max_tp = std::max(max_tp, f.tp + 1), max_pp = std::max(max_pp, f.pp + 1);
  int64_t Tt = arg_int(args, "tensor_model_parallel_size", arg_int(args, "model_parallel_size", 0));
  if (Tt == 0) Tt = opt.trained_tp;
  FTX_CHECK(Tt > 0 || max_tp == 1, dir,
            "the checkpoint has no args: pass --trained-tensor-parallel-size (and --head-num)");
  if (Tt == 0) Tt = 1;
  const int64_t PP = arg_int(args, "pipeline_model_parallel_size", max_pp);
  for (int64_t p = 0; p < PP; ++p)
    for (int64_t t = 0; t < Tt; ++t) {
      if (by_rank.count({t, p})) continue;
      char name[64];
      if (PP == 1) std::snprintf(name, sizeof name, "mp_rank_%02lld", (long long)t);
      else std::snprintf(name, sizeof name, "mp_rank_%02lld_%03lld", (long long)t, (long long)p);
      throw Error(dir, std::string("missing shard ") + name + "/model_optim_rng.pt (the checkpoint has " +
                           std::to_string(Tt) + " tensor parallel x " + std::to_string(PP) + " pipeline shards)");
    }

  // Features ftx (like FT) cannot represent for Megatron GPT: say so instead of writing garbage.
  if (args) {
    auto pe = arg(args, "position_embedding_type");
    FTX_CHECK(!arg_bool(args, "swiglu", false), dir, "swiglu Megatron models are not supported");
    FTX_CHECK(!(pe && pe->kind == Value::Kind::kString && pe->str == "rope") &&
                  !arg_bool(args, "use_rotary_position_embeddings", false),
              dir, "rotary (rope) Megatron models are not supported");
    FTX_CHECK(!arg_bool(args, "group_query_attention", false), dir, "grouped-query attention is not supported");
    FTX_CHECK(!arg_bool(args, "untie_embeddings_and_output_weights", false), dir,
              "untied input/output embeddings are not supported");
    FTX_CHECK(arg_bool(args, "add_bias_linear", true), dir, "bias-free (add_bias_linear=False) models are not supported");
  }

  // Load every shard; layers of pipeline stage p get the global offset p * (num_layers / PP).
  std::vector<std::pair<ShardFile, ValuePtr>> loaded;
  int64_t layers_arg = arg_int(args, "num_layers", 0);
  ShardGroups groups(Tt);
  int64_t layers_per_stage = -1;
  for (int64_t p = 0; p < PP; ++p) {
    for (int64_t t = 0; t < Tt; ++t) {
      const ShardFile& f = *by_rank[{t, p}];
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
  c.arch = Architecture::kGpt;
  c.model_name = "gpt";
  FTX_CHECK(groups.has("embedding.word_embeddings.weight"), dir, "has no embedding.word_embeddings.weight");
  FTX_CHECK(!groups.has("output_layer.weight"), dir, "has an output_layer (untied embeddings are not supported)");
  const auto& wte = groups.shards("embedding.word_embeddings.weight");
  FTX_CHECK(wte[0].shape.size() == 2, dir, "word embeddings are not 2-D: " + shape_to_string(wte[0].shape));
  const int64_t H = arg_int(args, "hidden_size", wte[0].shape[1]);
  c.head_num = arg_int(args, "num_attention_heads", opt.head_num);
  FTX_CHECK(c.head_num > 0, dir, "the checkpoint has no args: pass --head-num");
  FTX_CHECK(opt.head_num <= 0 || opt.head_num == c.head_num, dir,
            "--head-num " + std::to_string(opt.head_num) + " disagrees with the checkpoint's num_attention_heads " +
                std::to_string(c.head_num) + " (--head-num is for checkpoints without args)");
  FTX_CHECK(H % c.head_num == 0, dir,
            "hidden size " + std::to_string(H) + " is not a multiple of the head count " + std::to_string(c.head_num));
  FTX_CHECK(c.head_num % Tt == 0, dir, "head count " + std::to_string(c.head_num) +
                                           " is not divisible by the trained tensor parallel size " + std::to_string(Tt));
  c.size_per_head = H / c.head_num;
  c.inter_size = arg_int(args, "ffn_hidden_size", 4 * H);
  c.num_layer = layers_arg > 0 ? layers_arg : groups.num_layers();
  FTX_CHECK(c.num_layer % PP == 0, dir, "num_layers " + std::to_string(c.num_layer) +
                                            " is not divisible by the pipeline size " + std::to_string(PP));
  int64_t vocab_rows = 0;
  for (auto& s : wte) vocab_rows += s.shape.empty() ? 0 : s.shape[0];
  c.vocab_size = arg_int(args, "padded_vocab_size", vocab_rows);
  if (groups.has("embedding.position_embeddings.weight")) {
    const auto& wpe = groups.shards("embedding.position_embeddings.weight");
    c.max_pos_seq_len = arg_int(args, "max_position_embeddings", wpe[0].shape.empty() ? 0 : wpe[0].shape[0]);
  } else {
    c.position = PositionEmbedding::kNone;
  }
  // Megatron's LayerNorm default is 1e-5; FT's converter assumes 1e-6 for v0 (no args). ftx writes
  // the value the model was trained with when it is known, and Megatron's default otherwise.
  auto eps = arg(args, "layernorm_epsilon");
  c.layernorm_eps = (eps && eps->kind == Value::Kind::kFloat) ? eps->f : 1e-5;
  c.activation = arg_bool(args, "openai_gelu", false) ? Activation::kGeluTanh : Activation::kGelu;
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

  // Tokenizer files and ids (FT: vocab.json["<|endoftext|>"], else 50256).
  std::string vocab = opt.vocab_path, merges = opt.merges_path;
  c.start_id = c.end_id = 50256;
  if (!vocab.empty()) {
    auto mf = MappedFile::open(vocab);
    int64_t id = endoftext_id(std::string(reinterpret_cast<const char*>(mf->data()), mf->size()));
    if (id >= 0) c.start_id = c.end_id = id;
    plan.copy_files.emplace_back("vocab.json", Storage{mf->data(), mf->size(), mf, mf, 0, vocab});
  }
  if (!merges.empty()) {
    auto mf = MappedFile::open(merges);
    plan.copy_files.emplace_back("merges.txt", Storage{mf->data(), mf->size(), mf, mf, 0, merges});
  }

  // FT megatron_ckpt_convert.py also writes these, and args.txt with `k:v` lines.
  plan.extra_ini.emplace_back("has_adapters", "False");
  plan.extra_ini.emplace_back("adapter_inter_size", std::to_string(arg_int(args, "project_size", 0)));
  if (args) {
    std::string text;
    for (auto& kv : args->dict) text += kv.first->key_text() + ":" + python_str(kv.second) + "\n";
    plan.text_files.emplace_back("args.txt", text);
  }
  // Keep every loaded checkpoint alive as long as the plan (the views point into their mappings).
  (void)loaded;
  return plan;
}

}  // namespace ftx
