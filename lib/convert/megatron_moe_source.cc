// Megatron-DeepSpeed MoE GPT source adapter. What FT's megatron_gpt_moe_ckpt_convert.py reads and
// writes (scripts/reference/ft_moe_converter_ref.py lists the facts and their sources):
//   * dense shards mp_rank_XX_model_states.pt (or mp_rank_XX/model_states.pt), state dict under
//     'model' or 'module', checkpoint_version 3, the dense layers as a plain Megatron GPT;
//   * a MoE layer N has only layers.N.mlp.deepspeed_moe.gate.wg.weight [E, H] in the dense shard
//     (written transposed from rank 0); its experts are in layer_n_expert_e_mp_rank_XX_model_states.pt
//     (n: the MoE layer's index among the MoE layers, e: the global expert), whole (FT fixes the
//     experts' training TP size at 1 and reads the first dense rank whose file exists);
//   * the experts stacked per layer, each expert's FFN split over the inference ranks.
// What FT's script reads wrongly or not at all is refused by name.
#include "lib/convert/megatron_moe_source.h"

#include <cstdio>
#include <map>

#include "formats/error.h"
#include "formats/torch_checkpoint.h"
#include "lib/convert/layout_table.h"
#include "lib/convert/megatron_files.h"
#include "lib/convert/shard_groups.h"

namespace ftx {

namespace {

std::string join_path(const std::string& dir, const std::string& name) { return dir + "/" + name; }

std::string rank_name(const char* pattern, int64_t a, int64_t b = 0) {
  char buf[96];
  std::snprintf(buf, sizeof buf, pattern, static_cast<int>(a), static_cast<int>(b));
  return buf;
}

// FT's dense patterns at pipeline size 1 (DeepSpeed's names), the ones ftx reads.
const char* const kDensePatterns[] = {"mp_rank_%02d_model_states.pt", "mp_rank_%02d/model_states.pt"};
// FT's other DeepSpeed patterns: pipelined shards (FT names the gate file by the stage-local layer,
// so two stages' gates collide). (FT's model_rng.pt names are Megatron-LM's own shards, read by the
// Megatron path, whose layout refuses megatron_moe tensors by name.)
const char* const kRefusedPatterns[] = {
    "mp_rank_%02d_%03d_model_states.pt", "tp_rank_%02d_pp_rank_%03d_model_states.pt", "mp_rank_%02d_%03d/model_states.pt",
    "tp_rank_%02d_pp_rank_%03d/model_states.pt"};

// args.num_experts: Megatron-DeepSpeed's list (one entry per group of layers); FT takes entry 0.
int64_t num_experts(const ValuePtr& args, const std::string& origin) {
  ValuePtr v = megatron_arg(args, "num_experts");
  if (!v) return 0;
  if (v->kind == Value::Kind::kInt) return v->i;
  FTX_CHECK((v->kind == Value::Kind::kList || v->kind == Value::Kind::kTuple) && !v->items.empty() &&
                v->items[0]->kind == Value::Kind::kInt,
            origin, "args.num_experts is not a list of integers");
  for (const ValuePtr& e : v->items)
    FTX_CHECK(e->kind == Value::Kind::kInt && e->i == v->items[0]->i, origin,
              "args.num_experts = " + python_str(v) +
                  ": layers with different expert counts (pyramid MoE) are not supported (FT's layout has one expert_num)");
  return v->items[0]->i;
}

struct ExpertTensors {
  std::vector<TensorView> fc1_w, fc1_b, fc2_w, fc2_b;
};

// One expert file's four tensors, by FT's substrings; anything else is refused by name.
void read_expert(const std::string& path, ExpertTensors& x) {
  ValuePtr root = load_torch_checkpoint(path);
  FTX_CHECK(root && root->is_dict(), path, "is not a state dict of one expert");
  std::vector<NamedTensor> tensors;
  std::vector<NamedValue> others;
  flatten_value(root, "", tensors, others);
  std::map<std::string, TensorView> got;
  for (auto& nt : tensors) {
    std::string kind;
    for (const char* k : {"dense_h_to_4h.weight", "dense_h_to_4h.bias", "dense_4h_to_h.weight", "dense_4h_to_h.bias"})
      if (nt.name.find(k) != std::string::npos) kind = k;
    FTX_CHECK(!kind.empty(), path, "has the tensor '" + nt.name + "', which is no part of a GPT expert's FFN");
    FTX_CHECK(!got.count(kind), path, "holds more than one expert (two tensors named *" + kind + ")");
    check_float_weight(nt.tensor, path + ":" + nt.name);
    got[kind] = nt.tensor;
  }
  for (const char* k : {"dense_h_to_4h.weight", "dense_h_to_4h.bias", "dense_4h_to_h.weight", "dense_4h_to_h.bias"})
    FTX_CHECK(got.count(k), path, std::string("has no *") + k + " tensor");
  x.fc1_w.push_back(got["dense_h_to_4h.weight"]);
  x.fc1_b.push_back(got["dense_h_to_4h.bias"]);
  x.fc2_w.push_back(got["dense_4h_to_h.weight"]);
  x.fc2_b.push_back(got["dense_4h_to_h.bias"]);
}

void check_shape(const TensorView& t, const std::vector<int64_t>& want, const std::string& what) {
  FTX_CHECK(t.shape == want, what,
            "has shape " + shape_to_string(t.shape) + ", expected " + shape_to_string(want) +
                " (experts are read whole, as trained with enable_expert_tensor_parallelism off)");
}

// The experts of one layer, each transposed and split alone, stacked per rank (FT's [E, ...] files).
TensorJob stack_job(const std::string& name, const std::string& source, std::vector<TensorView> experts, bool transpose,
                    OutSplit split) {
  TensorJob j;
  j.name = name;
  j.source = source;
  j.shards = std::move(experts);
  j.stack_experts = true;
  j.transpose = transpose;
  j.split = split;
  return j;
}

}  // namespace

bool is_megatron_moe_dir(const std::string& dir) {
  for (const char* p : kDensePatterns)
    if (path_exists(join_path(dir, rank_name(p, 0)))) return true;
  for (const char* p : kRefusedPatterns)
    if (path_exists(join_path(dir, rank_name(p, 0, 0)))) return true;
  return false;
}

ConversionPlan plan_megatron_moe(const ConvertOptions& opt, const std::string& dir) {
  const char* pattern = nullptr;
  for (const char* p : kDensePatterns)
    if (!pattern && path_exists(join_path(dir, rank_name(p, 0)))) pattern = p;
  if (!pattern)
    for (const char* p : kRefusedPatterns) {
      const std::string n = rank_name(p, 0, 0);
      if (!path_exists(join_path(dir, n))) continue;
      throw Error(join_path(dir, n), "pipeline-parallel MoE checkpoints are not supported (FT's converter names the "
                                     "gate file by the stage's local layer); ftx reads pipeline size 1");
    }
  const std::string path0 = join_path(dir, rank_name(pattern, 0));
  ValuePtr root0 = load_torch_checkpoint(path0);
  const char* model_key = root0->get("model") ? "model" : "module";
  FTX_CHECK(root0->get(model_key), path0, "has neither a 'model' nor a 'module' state dict");
  ValuePtr args = root0->get("args");
  FTX_CHECK(args && args->is_dict(), path0, "has no args (FT's MoE converter needs the training arguments)");
  double version = -1;
  if (auto v = root0->get("checkpoint_version")) version = v->kind == Value::Kind::kFloat ? v->f : double(v->i);
  FTX_CHECK(version == 3.0, path0,
            "checkpoint_version = " + (root0->get("checkpoint_version") ? python_str(root0->get("checkpoint_version")) : "absent") +
                ": MoE checkpoints are read at version 3 only (as FT's converter asserts)");
  const int64_t Tt = megatron_arg_int(args, "tensor_model_parallel_size", 1);
  const int64_t PP = megatron_arg_int(args, "pipeline_model_parallel_size", 1);
  FTX_CHECK(Tt >= 1, path0, "args.tensor_model_parallel_size = " + std::to_string(Tt) + " is not positive");
  FTX_CHECK(PP == 1, path0, "args.pipeline_model_parallel_size = " + std::to_string(PP) +
                                ": pipeline-parallel MoE checkpoints are not supported (FT's converter names the gate "
                                "file by the stage's local layer)");
  const int64_t E = num_experts(args, path0);
  FTX_CHECK(megatron_arg_str(args, "mlp_type", "standard") == "standard", path0,
            "args.mlp_type = " + megatron_arg_str(args, "mlp_type", "") +
                ": residual MoE (PR-MoE, a dense MLP beside the experts) is not supported by FT's GPT-MoE layout");
  FTX_CHECK(!megatron_arg_bool(args, "enable_expert_tensor_parallelism", false), path0,
            "args.enable_expert_tensor_parallelism = True: experts split over the training tensor parallel ranks "
            "are not supported (FT's converter reads each expert whole from one file)");
  const int64_t topk = megatron_arg_int(args, "topk", 1);
  FTX_CHECK(topk == 1 || topk == 2, path0,
            "args.topk = " + std::to_string(topk) + " is not supported: DeepSpeed's MoE gate (TopKGate) routes each "
                                                    "token to 1 or 2 experts");
  FTX_CHECK(!megatron_arg_bool(args, "swiglu", false), path0, "swiglu Megatron models are not supported");

  // Dense shards: every rank's encoder, the gates taken out (FT writes them from rank 0).
  ShardGroups groups(Tt);
  std::vector<int64_t> moe_layers;
  std::map<int64_t, std::pair<std::string, TensorView>> gates;
  for (int64_t t = 0; t < Tt; ++t) {
    const std::string name = rank_name(pattern, t);
    const std::string path = join_path(dir, name);
    FTX_CHECK(t == 0 || path_exists(path), path,
              "missing shard (args.tensor_model_parallel_size = " + std::to_string(Tt) + ")");
    ValuePtr root = t == 0 ? root0 : load_torch_checkpoint(path);
    ValuePtr model = root->get(model_key);
    ValuePtr lm = model && model->is_dict() ? model->get("language_model") : nullptr;
    FTX_CHECK(lm && lm->is_dict(), path, std::string("has no ") + model_key + ".language_model");
    std::vector<NamedTensor> tensors;
    std::vector<NamedValue> others;
    flatten_value(lm, "", tensors, others);
    for (auto& nt : tensors) {
      std::string n = nt.name;
      if (n.rfind("encoder.", 0) == 0) n = n.substr(8);
      FTX_CHECK(n.find("megatron_moe") == std::string::npos, path,
                "has '" + nt.name + "': Megatron's own MoE (megatron_moe) is not supported, only DeepSpeed's");
      FTX_CHECK(n.find("experts") == std::string::npos, path,
                "has the expert tensor '" + nt.name + "' in the dense shard (FT's converter reads experts only from "
                "layer_N_expert_E_* files)");
      FTX_CHECK(n.find("coefficient") == std::string::npos, path,
                "has '" + nt.name + "': residual MoE (PR-MoE) is not supported");
      if (n.find("deepspeed_moe.gate") != std::string::npos) {
        FTX_CHECK(n.rfind("layers.", 0) == 0 && n.size() > 7 && n.substr(n.find('.', 7)) == ".mlp.deepspeed_moe.gate.wg.weight",
                  path, "unexpected gate tensor '" + nt.name + "'");
        const int64_t layer = std::stoll(n.substr(7, n.find('.', 7) - 7));
        if (t == 0) {
          moe_layers.push_back(layer);
          gates[layer] = {name + ":" + nt.name, nt.tensor};
        }
        continue;
      }
      groups.add(n, 0, t, nt.tensor, name);
    }
  }
  FTX_CHECK(E > 0 || moe_layers.empty(), path0, "has gates (deepspeed_moe.gate) but args.num_experts is absent");

  ConversionPlan plan;
  plan.source_format = "megatron-deepspeed-moe";
  plan.source_path = opt.in_path;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kGpt;
  c.model_name = "gpt";
  FTX_CHECK(groups.has("embedding.word_embeddings.weight"), path0, "has no embedding.word_embeddings.weight");
  const auto& wte = groups.shards("embedding.word_embeddings.weight");
  FTX_CHECK(wte[0].shape.size() == 2, path0, "word embeddings are not 2-D: " + shape_to_string(wte[0].shape));
  const int64_t H = megatron_arg_int(args, "hidden_size", wte[0].shape[1]);
  c.head_num = megatron_arg_int(args, "num_attention_heads", 0);
  FTX_CHECK(c.head_num > 0 && H % c.head_num == 0 && c.head_num % Tt == 0, path0,
            "args.num_attention_heads = " + std::to_string(c.head_num) + " does not divide hidden_size " +
                std::to_string(H) + " into heads shared by " + std::to_string(Tt) + " tensor parallel ranks");
  c.size_per_head = H / c.head_num;
  c.kv_head_num = c.head_num;
  c.inter_size = megatron_arg_int(args, "ffn_hidden_size", 4 * H);
  c.num_layer = megatron_arg_int(args, "num_layers", groups.num_layers());
  int64_t vocab_rows = 0;
  for (auto& s : wte) vocab_rows += s.shape[0];
  c.vocab_size = megatron_arg_int(args, "padded_vocab_size", vocab_rows);
  FTX_CHECK(groups.has("embedding.position_embeddings.weight"), path0, "has no embedding.position_embeddings.weight");
  c.max_pos_seq_len = megatron_arg_int(args, "max_position_embeddings",
                                       groups.shards("embedding.position_embeddings.weight")[0].shape[0]);
  c.layernorm_eps = megatron_arg_double(args, "layernorm_epsilon", 1e-5);
  c.activation = megatron_arg_bool(args, "openai_gelu", false) ? Activation::kGeluTanh : Activation::kGelu;
  if (!moe_layers.empty()) {
    c.expert_num = E;
    c.moe_layers = moe_layers;
    c.moe_top_k = topk;
    // DeepSpeed's TopKGate (deepspeed/moe/sharded_moe.py): top1gating weights the chosen expert by its
    // softmax probability as it is; top2gating divides the two by their sum.
    c.moe_routing = topk == 1 ? MoeRouting::kSoftmaxTopK : MoeRouting::kSoftmaxTopKRenorm;
  }

  JobContext ctx;
  ctx.heads_per_shard = c.head_num / Tt;
  ctx.head_dim = c.size_per_head;
  ctx.hidden = H;
  ctx.qkv = QkvOrder::kHeadQkv;  // checkpoint_version 3: [n_l, 3, d]
  groups.build_jobs(megatron_gpt_layout(), ctx, dir, plan.jobs);

  const int64_t I = c.inter_size;
  for (size_t n = 0; n < moe_layers.size(); ++n) {
    const int64_t L = moe_layers[n];
    const std::string p = "model.layers." + std::to_string(L) + ".mlp.moe.";
    const auto& gate = gates[L];
    check_float_weight(gate.second, gate.first);
    FTX_CHECK(gate.second.shape == std::vector<int64_t>({E, H}), gate.first,
              "has shape " + shape_to_string(gate.second.shape) + ", expected [" + std::to_string(E) + ", " +
                  std::to_string(H) + "] (args.num_experts, hidden_size)");
    TensorJob g;
    g.name = p + "gate.wg.weight";
    g.source = gate.first;
    g.shards = {gate.second};
    g.transpose = true;
    plan.jobs.push_back(std::move(g));

    ExpertTensors x;
    for (int64_t e = 0; e < E; ++e) {
      std::string found;
      for (int64_t r = 0; r < Tt && found.empty(); ++r) {
        const std::string f = join_path(dir, "layer_" + std::to_string(n) + "_expert_" + std::to_string(e) +
                                                 rank_name("_mp_rank_%02d_model_states.pt", r));
        if (path_exists(f)) found = f;
      }
      if (found.empty()) {
        const std::string want = join_path(dir, "layer_" + std::to_string(n) + "_expert_" + std::to_string(e) +
                                                     "_mp_rank_00_model_states.pt");
        const std::string piped = join_path(dir, "layer_" + std::to_string(n) + "_expert_" + std::to_string(e) +
                                                      "_mp_rank_00_000_model_states.pt");
        if (path_exists(piped))
          throw Error(piped, "experts saved under pipeline-parallel names are not supported (FT's converter reads "
                             "layer_N_expert_E_mp_rank_XX_model_states.pt)");
        throw Error(want, "missing expert file: expert " + std::to_string(e) + " of MoE layer " + std::to_string(n) +
                              " (model layer " + std::to_string(L) + "; args.num_experts = " + std::to_string(E) + ")");
      }
      read_expert(found, x);
      check_shape(x.fc1_w.back(), {I, H}, found + ":dense_h_to_4h.weight");
      check_shape(x.fc1_b.back(), {I}, found + ":dense_h_to_4h.bias");
      check_shape(x.fc2_w.back(), {H, I}, found + ":dense_4h_to_h.weight");
      check_shape(x.fc2_b.back(), {H}, found + ":dense_4h_to_h.bias");
    }
    const std::string src = join_path(dir, "layer_" + std::to_string(n) + "_expert_*");
    plan.jobs.push_back(stack_job(p + "experts.dense_h_to_4h.weight", src, x.fc1_w, true, OutSplit::kColumn));
    plan.jobs.push_back(stack_job(p + "experts.dense_h_to_4h.bias", src, x.fc1_b, false, OutSplit::kColumn));
    plan.jobs.push_back(stack_job(p + "experts.dense_4h_to_h.weight", src, x.fc2_w, true, OutSplit::kRow));
    plan.jobs.push_back(stack_job(p + "experts.dense_4h_to_h.bias", src, x.fc2_b, false, OutSplit::kReplicated));
  }

  add_megatron_side_files(plan, opt, args);
  return plan;
}

}  // namespace ftx
