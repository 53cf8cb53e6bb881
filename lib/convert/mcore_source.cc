// Megatron Core GPT source adapter (issue 27): legacy shards and torch_dist checkpoints of
// Megatron-LM and NeMo, through mcore_gpt_layout(). A legacy shard holds its TP slice with local
// layer numbers; a distributed checkpoint holds global tensors, layers stacked on a leading axis,
// in chunks that are used as the training shards of the jobs (so the chunks a job needs are read
// when it runs, and only then).
#include "lib/convert/mcore_source.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "formats/dcp_checkpoint.h"
#include "formats/error.h"
#include "formats/torch_checkpoint.h"
#include "lib/convert/dcp_shards.h"
#include "lib/convert/mcore_experts.h"
#include "lib/convert/mcore_model.h"
#include "lib/convert/shard_groups.h"
#include "lib/convert/source_names.h"
#include "lib/convert/tied_output_layer.h"

namespace ftx {

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// The name without NeMo's `model.` (and Megatron's DDP/fp16 `module.` wrappers), or "" when it is
// not a model weight.
std::string strip_prefix(const std::string& name, const std::string& prefix) {
  if (!starts_with(name, prefix)) return "";
  std::string n = name.substr(prefix.size());
  while (starts_with(n, "module.")) n = n.substr(7);
  return n;
}

// decoder.layers.N.* -> layers.N.*, decoder.final_layernorm.* -> final_layernorm.*.
std::string layout_name(const std::string& n) { return starts_with(n, "decoder.") ? n.substr(8) : n; }

// ---- legacy shards --------------------------------------------------------------------------

struct LegacyShard {
  int64_t tp, pp, ep;                 // ep: the expert-parallel rank (0 without expert parallelism)
  std::string origin;                 // the shard's file (or archive member)
  std::vector<NamedTensor> tensors;   // names without prefixes, local layer numbers
};

[[noreturn]] void refuse_experts_without_args(const std::string& name, const std::string& origin) {
  throw Error(origin, "has the expert tensor '" + name + "' but the model's settings name no experts (num_experts)");
}

void add_legacy_jobs(const McoreArgs& a, const std::vector<LegacyShard>& shards, const std::string& origin,
                     ConversionPlan& plan) {
  ShardGroups groups(a.tp);
  McoreExperts experts(a);
  NamePrefixes prefixes;  // decoder.: a missing layer tensor named as Megatron Core names it
  std::map<int64_t, const TensorView*> wte;  // per TP rank: the word embeddings
  std::vector<std::pair<const LegacyShard*, const TensorView*>> copies;  // a tied model's output layers
  for (const auto& s : shards)
    for (const auto& nt : s.tensors) {
      if (is_mcore_expert_name(nt.name)) {
        if (a.experts == 0) refuse_experts_without_args(nt.name, origin + "/" + s.origin);
        experts.add_legacy(nt.name, s.pp * (a.num_layers / a.pp), s.tp, s.ep, nt.tensor,
                           origin + "/" + s.origin);
        continue;
      }
      if (s.ep > 0) continue;  // every expert-parallel rank holds the same copy of the rest
      if (nt.name == "embedding.word_embeddings.weight") wte[s.tp] = &nt.tensor;
      if (a.tied && nt.name == "output_layer.weight") {
        copies.push_back({&s, &nt.tensor});
        continue;
      }
      groups.add(layout_name(nt.name), s.pp * (a.num_layers / a.pp), s.tp, nt.tensor, s.origin);
      prefixes.add(nt.name, layout_name(nt.name));
    }
  // With tied embeddings a last stage holds output_layer.weight, a copy of the word embeddings kept
  // equal by Megatron: dropped when it is that copy, refused when it is not (tied_output_layer.h).
  for (const auto& c : copies) {
    auto it = wte.find(c.first->tp);
    if (it == wte.end() || !same_tensor_values(*it->second, *c.second))
      refuse_untied_output_layer(a, origin + "/" + c.first->origin);
  }
  FTX_CHECK(groups.has("embedding.word_embeddings.weight"), origin, "has no embedding.word_embeddings.weight");
  int64_t vocab_rows = 0;
  for (auto& s : groups.shards("embedding.word_embeddings.weight")) vocab_rows += s.shape.empty() ? 0 : s.shape[0];
  FTX_CHECK(groups.num_layers() == a.num_layers, origin,
            "holds " + std::to_string(groups.num_layers()) + " layers, the arguments say " + std::to_string(a.num_layers));
  plan.cfg = mcore_model_config(a, vocab_rows, origin);
  groups.build_jobs(mcore_gpt_layout(), mcore_job_context(a, a.tp), origin, plan.jobs);
  if (a.experts > 0) experts.build_legacy_jobs(origin, plan.jobs);
  plan.source_names = checkpoint_names(mcore_gpt_layout(), std::move(prefixes));
}

// ---- distributed checkpoints ----------------------------------------------------------------

// The axis a job merges its shards on, in the source's [out, in] orientation: column-parallel
// tensors (QKV, linear_fc1) split their outputs, row-parallel ones their inputs, the vocabulary
// its rows; replicated tensors are one chunk.
int split_axis(Role role, size_t rank) {
  switch (role) {
    case Role::kReplicated: return -1;
    case Role::kVocab: return 0;
    case Role::kRow: return rank == 2 ? 1 : -1;
    default: return 0;  // kColumn, kColumnGated, kQkv: the output axis
  }
}

struct DistTensor {
  std::string name;        // as stored
  std::string layout;      // layout name; for stacked tensors with "layers.N." to be filled in
  bool stacked = false;    // decoder.layers.*: [num_layers, ...]
};

void add_dist_job(const McoreArgs& a, const RuleMatch& m, const ChunkViews& chunks, std::vector<int64_t> shape,
                  const std::string& what, std::vector<TensorJob>& jobs) {
  const int axis = split_axis(m.rule->role, shape.size());
  const bool gated = m.rule->role == Role::kColumnGated && a.activation.is_gated();
  if (!gated) {
    std::vector<TensorView> shards = shards_along(chunks, shape, axis, what);
    add_layout_jobs(m, shards, what, mcore_job_context(a, static_cast<int64_t>(shards.size())), jobs);
    return;
  }
  // A gated linear_fc1 is stored globally as [activated half | linear half] on its output axis
  // (Megatron Core's swiglu sharded factory), whatever the training TP: each half is one job.
  FTX_CHECK(!shape.empty() && shape[0] % 2 == 0, what, "gated linear_fc1 has an odd output size");
  const int64_t half = shape[0] / 2;
  std::vector<int64_t> half_shape = shape;
  half_shape[0] = half;
  for (int h = 0; h < 2; ++h) {
    RuleMatch hm = m;
    if (h == 1) {
      const std::string stem = "mlp.dense_h_to_4h.";
      hm.ft_name.replace(hm.ft_name.find(stem), stem.size(), stem + "gate.");
    }
    std::vector<TensorView> shards =
        shards_along(narrow_range(chunks, 0, h * half, (h + 1) * half), half_shape, 0, what);
    JobContext ctx = mcore_job_context(a, static_cast<int64_t>(shards.size()));
    ctx.gated = false;  // already halved
    add_layout_jobs(hm, shards, what, ctx, jobs);
  }
}

// Jobs for every model tensor of `ck` whose name starts with `prefix`.
void add_dist_jobs(const McoreArgs& a, const DcpCheckpoint& ck, const std::string& prefix, ConversionPlan& plan) {
  const std::string& origin = ck.origin();
  std::vector<DistTensor> todo;
  const std::string wte = prefix + "embedding.word_embeddings.weight";
  FTX_CHECK(ck.has(wte), origin, "has no tensor '" + wte + "'");
  const auto& wte_info = ck.info(wte);
  FTX_CHECK(wte_info.shape.size() == 2, origin, "word embeddings are not 2-D: " + shape_to_string(wte_info.shape));
  for (const auto& kv : ck.tensors()) {
    const std::string n = strip_prefix(kv.first, prefix);
    if (n.empty() || starts_with(n, "optimizer.")) continue;  // optimizer state, other models' keys
    if (a.tied && n == "output_layer.weight") {
      // Megatron Core stores a tied pair once; an output layer here is kept only by refusing it
      // when it is not the embeddings' copy (tied_output_layer.h).
      const DcpTensorInfo& info = kv.second;
      if (info.dtype != wte_info.dtype || info.shape != wte_info.shape ||
          !same_tensor_values(ck.chunks(kv.first), ck.chunks(wte), info.shape, origin + ":" + kv.first))
        refuse_untied_output_layer(a, origin);
      continue;
    }
    DistTensor t{kv.first, layout_name(n), false};
    if (starts_with(n, "decoder.layers.")) {
      t.stacked = true;
      t.layout = n.substr(std::string("decoder.layers.").size());
    }
    if (t.stacked && is_mcore_expert_name(t.layout) && a.experts == 0) refuse_experts_without_args(kv.first, origin);
    todo.push_back(std::move(t));
  }
  plan.cfg = mcore_model_config(a, wte_info.shape[0], origin);

  for (const DistTensor& t : todo) {
    if (t.stacked && is_mcore_expert_name(t.layout)) {
      add_mcore_dist_expert_jobs(a, ck, t.name, t.layout, plan.jobs);
      continue;
    }
    const DcpTensorInfo& info = ck.info(t.name);
    const std::string what = origin + ":" + t.name;
    if (!t.stacked) {
      auto m = match_layout(mcore_gpt_layout(), t.layout, origin);
      if (!m) continue;
      add_dist_job(a, *m, ck.chunks(t.name), info.shape, what, plan.jobs);
      continue;
    }
    // Probe the rule with layer 0 first, so that skipped entries (_extra_state) read no chunk.
    if (!match_layout(mcore_gpt_layout(), "layers.0." + t.layout, origin)) continue;
    FTX_CHECK(!info.shape.empty() && info.shape[0] == a.num_layers, what,
              "has shape " + shape_to_string(info.shape) + ", expected " + std::to_string(a.num_layers) +
                  " layers on axis 0");
    const ChunkViews chunks = ck.chunks(t.name);
    const std::vector<int64_t> layer_shape(info.shape.begin() + 1, info.shape.end());
    for (int64_t l = 0; l < a.num_layers; ++l) {
      auto m = match_layout(mcore_gpt_layout(), "layers." + std::to_string(l) + "." + t.layout, origin);
      add_dist_job(a, *m, select_index(chunks, l), layer_shape, what + "[" + std::to_string(l) + "]", plan.jobs);
    }
  }
}

// metadata.json names the backend; only torch_dist is a DCP folder.
void check_dist_backend(const std::string& path, const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("bad JSON: ") + e.what());
  }
  const std::string backend = j.value("sharded_backend", std::string("torch_dist"));
  FTX_CHECK(backend == "torch_dist", path,
            "sharded_backend '" + backend + "' is not supported (only torch_dist distributed checkpoints)");
}

}  // namespace

bool is_mcore_state_dict(const ValuePtr& model) {
  if (!model || !model->is_dict() || model->get("language_model")) return false;
  for (const auto& kv : model->dict) {
    const std::string k = kv.first->key_text();
    if (starts_with(k, "decoder.") || starts_with(k, "embedding.")) return true;
  }
  return false;
}

ConversionPlan plan_mcore_megatron_legacy(const ConvertOptions& opt, const std::string& dir,
                                          const std::vector<MegatronShardFile>& files, const ValuePtr& root0) {
  ValuePtr args = root0->get("args");
  if (args && !args->is_dict()) args = nullptr;
  const McoreArgs a = mcore_args_from_megatron(args, files.front().path);
  std::map<std::pair<int64_t, int64_t>, const MegatronShardFile*> by_rank;
  for (const auto& f : files) by_rank[{f.tp, f.pp}] = &f;
  std::vector<LegacyShard> shards;
  for (int64_t p = 0; p < a.pp; ++p)
    for (int64_t t = 0; t < a.tp; ++t)
      for (int64_t e = 0; e < a.ep; ++e) {
        // Expert parallelism appends the expert-parallel rank: mp_rank_TT[_PPP]_EEE (Megatron-LM's
        // get_checkpoint_name), so such a name is read from the args, not from the folder's names.
        std::string dir_name = megatron_shard_name(t, p, a.pp), path;
        if (a.ep > 1) {
          char ep[8];
          std::snprintf(ep, sizeof ep, "_%03lld", static_cast<long long>(e));
          dir_name += ep;
          path = dir + "/" + dir_name + "/model_optim_rng.pt";
          FTX_CHECK(path_exists(path), dir,
                    "missing shard " + dir_name + "/model_optim_rng.pt (the checkpoint has " + std::to_string(a.tp) +
                        " tensor parallel x " + std::to_string(a.pp) + " pipeline x " + std::to_string(a.ep) +
                        " expert parallel shards)");
        } else {
          auto it = by_rank.find({t, p});
          FTX_CHECK(it != by_rank.end(), dir,
                    "missing shard " + dir_name + "/model_optim_rng.pt (the checkpoint has " + std::to_string(a.tp) +
                        " tensor parallel x " + std::to_string(a.pp) + " pipeline shards)");
          path = it->second->path;
          dir_name = it->second->dir_name;
        }
        ValuePtr root = (t == 0 && p == 0 && a.ep == 1) ? root0 : load_torch_checkpoint(path);
        FTX_CHECK(!root->get("model0"), path, "virtual pipeline checkpoints (model0, ...) are not supported");
        ValuePtr model = root->get("model");
        FTX_CHECK(model && model->is_dict(), path, "has no 'model' state dict");
        LegacyShard s{t, p, e, dir_name, {}};
        std::vector<NamedValue> others;
        flatten_value(model, "", s.tensors, others);
        shards.push_back(std::move(s));
      }
  ConversionPlan plan;
  plan.source_format = "megatron";
  plan.source_path = opt.in_path;
  add_legacy_jobs(a, shards, dir, plan);
  add_megatron_side_files(plan, opt, args);
  return plan;
}

ConversionPlan plan_mcore_megatron_dist(const ConvertOptions& opt, const std::string& dir) {
  if (path_exists(dir + "/metadata.json")) check_dist_backend(dir + "/metadata.json", read_text_file(dir + "/metadata.json"));
  const std::string common = dir + "/common.pt";
  FTX_CHECK(path_exists(common), dir, "has no common.pt (a torch_dist checkpoint keeps the model's args there)");
  ValuePtr root = load_torch_checkpoint(common);
  ValuePtr args = root->is_dict() ? root->get("args") : nullptr;
  if (args && !args->is_dict()) args = nullptr;
  McoreArgs a = mcore_args_from_megatron(args, common);
  a.tp = a.pp = a.ep = 1;  // the tensors are global
  DcpCheckpoint ck = DcpCheckpoint::open_dir(dir);
  ConversionPlan plan;
  plan.source_format = "megatron";
  plan.source_path = opt.in_path;
  add_dist_jobs(a, ck, "", plan);
  add_megatron_side_files(plan, opt, args);
  return plan;
}

namespace {

// The folder of a distributed model_weights/ in a .nemo ("" when there is none).
std::string nemo_dist_dir(const NemoFiles& files) {
  for (const auto& n : files.names()) {
    const std::string tail = "model_weights/.metadata";
    if (n == tail || (n.size() > tail.size() && n.compare(n.size() - tail.size() - 1, tail.size() + 1, "/" + tail) == 0))
      return n.substr(0, n.size() - std::string(".metadata").size());
  }
  return "";
}

}  // namespace

bool is_mcore_nemo(const YAML::Node& cfg, const NemoFiles& files) {
  bool mcore = false;
  if (cfg["mcore_gpt"] && cfg["mcore_gpt"].IsScalar()) {
    try {
      mcore = cfg["mcore_gpt"].as<bool>();
    } catch (const YAML::Exception&) {
    }
  }
  return mcore || !nemo_dist_dir(files).empty();
}

void plan_mcore_nemo_weights(const NemoFiles& files, const YAML::Node& cfg, const std::string& yorigin,
                             ConversionPlan& plan) {
  McoreArgs a = mcore_args_from_nemo(cfg, yorigin);
  const std::string dist = nemo_dist_dir(files);
  if (!dist.empty()) {
    if (files.has(dist + "metadata.json")) {
      const Storage s = files.get(dist + "metadata.json");
      check_dist_backend(files.origin(dist + "metadata.json"),
                         std::string(reinterpret_cast<const char*>(s.data), static_cast<size_t>(s.nbytes)));
    }
    a.tp = a.pp = a.ep = 1;  // the tensors are global
    const std::string origin = files.origin(dist.substr(0, dist.size() - 1));
    DcpCheckpoint ck(origin, [&files, dist](const std::string& name) {
      FTX_CHECK(files.has(dist + name), files.origin(dist + name), "is missing");
      return files.get(dist + name);
    });
    add_dist_jobs(a, ck, "model.", plan);
    return;
  }
  FTX_CHECK(a.ep == 1, yorigin,
            "expert_model_parallel_size = " + std::to_string(a.ep) +
                " with per-rank model_weights.ckpt files is not supported (a distributed model_weights/ is)");
  std::vector<LegacyShard> shards;
  for (int64_t p = 0; p < a.pp; ++p)
    for (int64_t t = 0; t < a.tp; ++t) {
      const std::string member = nemo_weights_member(files, t, p, a.tp, a.pp);
      ValuePtr root = load_torch_checkpoint(files.get(member));
      if (auto sd = root->get("state_dict"); sd && sd->is_dict()) root = sd;
      std::vector<NamedTensor> tensors;
      std::vector<NamedValue> others;
      flatten_value(root, "", tensors, others);
      LegacyShard s{t, p, 0, member.substr(0, member.find('/')), {}};
      for (auto& nt : tensors) {
        const std::string n = strip_prefix(nt.name, "model.");
        if (!n.empty()) s.tensors.push_back({n, nt.tensor});  // e.g. prompt tables are converted separately
      }
      shards.push_back(std::move(s));
    }
  add_legacy_jobs(a, shards, files.path(), plan);
}

}  // namespace ftx
