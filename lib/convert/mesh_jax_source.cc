// mesh-transformer-jax slim checkpoint -> FT's GPT-J layout (see mesh_jax_source.h).
//
// The arrays of one shard, in file order, are jax.tree_flatten of {"params": ..., "step": ...}
// (checkpoint.py's write_ckpt, split over the numbered files in order): haiku's modules sorted by
// name, each module's parameters sorted (b < w, offset < scale):
//   embedding_shard/~/linear: b [d], w [V/S, d]
//   layer_N, N in string order (0, 1, 10, 11, ..., 19, 2, 20, ...), each:
//     linear/w (q), linear_1/w (v), linear_2/w (k) [d, d/S]; linear_3/w (out) [d/S, d];
//     linear_4/b [I/S], linear_4/w [d, I/S] (fc_in); linear_5/b [d], linear_5/w [I/S, d] (fc_out);
//     replicated_layer_norm/offset, /scale [d] (ln_1)
//   projection_shard/~/linear: b [V/S], w [d, V/S]; projection_shard/~/replicated_layer_norm: offset, scale [d]
//   step (a scalar)
// Haiku's Linear keeps w as [in, out], FT's layout: only lm_head (FT's [V, d]) is transposed.
// How the S shards of a parameter make one tensor follows the model's arithmetic (layers.py):
// column-parallel outputs (q, k, v, fc_in, lm_head) concatenate in shard order, row-parallel inputs
// (out, fc_out, the embedding's vocabulary rows) concatenate, the biases each shard adds before
// its psum (the embedding's, fc_out's) are summed, and a layer norm is shard 0's (all_gather(...)[0];
// the other shards keep their initial ones and zeros). FT's converter infers these roles from the
// values; docs/converters.md says where its guesses and this differ.
#include "lib/convert/mesh_jax_source.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "formats/npz.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/layout_table.h"
#include "lib/convert/megatron_files.h"

namespace ftx {

namespace {

namespace fs = std::filesystem;

struct Leaf {
  TensorView t;
  std::string origin;  // "DIR/shard_3/7.npz:arr_4"
};

std::string shard_dir(const std::string& dir, int64_t s) { return (fs::path(dir) / ("shard_" + std::to_string(s))).string(); }

std::string range_text(int64_t pieces) { return "0.npz .. " + std::to_string(pieces - 1) + ".npz"; }

// The numbered files of shard_0: 0 .. P-1, none missing.
int64_t count_pieces(const std::string& shard0) {
  static const std::regex numbered(R"((0|[1-9][0-9]{0,5})\.npz)");
  int64_t last = -1, found = 0;
  for (const std::string& n : list_dir(shard0)) {
    if (!std::regex_match(n, numbered)) continue;
    last = std::max<int64_t>(last, std::stoll(n));
    ++found;
  }
  FTX_CHECK(found > 0, shard0, "holds no numbered .npz files (0.npz, 1.npz, ...): not a mesh-transformer-jax shard");
  for (int64_t p = 0; p <= last; ++p) {
    const std::string f = (fs::path(shard0) / (std::to_string(p) + ".npz")).string();
    FTX_CHECK(fs::exists(f), f, "missing: shard_0 holds files up to " + std::to_string(last) + ".npz");
  }
  return last + 1;
}

// Every shard's arrays in order; every shard must have shard_0's files with as many arrays each.
std::vector<std::vector<Leaf>> read_shards(const std::string& dir, int64_t S) {
  for (int64_t s = 0; s < S; ++s) {
    const std::string d = shard_dir(dir, s);
    FTX_CHECK(fs::is_directory(d), d,
              "missing: the checkpoint has " + std::to_string(S) + " shard folders (shard_0 .. shard_" +
                  std::to_string(S - 1) + ", --shards " + std::to_string(S) + ")");
  }
  FTX_CHECK(!fs::exists(shard_dir(dir, S)), shard_dir(dir, S),
            "is a shard beyond --shards " + std::to_string(S) + ": pass the checkpoint's cores_per_replica as --shards");
  const int64_t P = count_pieces(shard_dir(dir, 0));
  std::vector<size_t> per_piece;  // shard_0's array count in each file
  std::vector<std::vector<Leaf>> shards(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t p = 0; p < P; ++p) {
      const std::string f = (fs::path(shard_dir(dir, s)) / (std::to_string(p) + ".npz")).string();
      FTX_CHECK(fs::exists(f), f, "missing: shard_0 holds " + range_text(P));
      const std::vector<NamedTensor> arrays = read_npz(file_storage(MappedFile::open(f)), /*void2_is_bfloat16=*/true);
      if (s == 0) per_piece.push_back(arrays.size());
      FTX_CHECK(arrays.size() == per_piece[static_cast<size_t>(p)], f,
                "holds " + std::to_string(arrays.size()) + " arrays where shard_0/" + std::to_string(p) + ".npz holds " +
                    std::to_string(per_piece[static_cast<size_t>(p)]));
      for (const NamedTensor& a : arrays) shards[static_cast<size_t>(s)].push_back({a.tensor, f + ":" + a.name});
    }
    const std::string extra = (fs::path(shard_dir(dir, s)) / (std::to_string(P) + ".npz")).string();
    FTX_CHECK(!fs::exists(extra), extra, "is beyond shard_0's " + range_text(P));
  }
  return shards;
}

// The parameters of one layer, in file order, with what each is.
const char* const kLayerParams[10] = {
    "linear/w (q_proj)",     "linear_1/w (v_proj)",  "linear_2/w (k_proj)",
    "linear_3/w (out_proj)", "linear_4/b (fc_in bias)", "linear_4/w (fc_in)",
    "linear_5/b (fc_out bias)", "linear_5/w (fc_out)", "replicated_layer_norm/offset (ln_1 bias)",
    "replicated_layer_norm/scale (ln_1 weight)"};

}  // namespace

ConversionPlan plan_mesh_jax(const ConvertOptions& opt, const MeshJaxOptions& m) {
  const std::string& dir = opt.in_path;
  FTX_CHECK(fs::is_directory(dir), dir,
            "is not a folder: a mesh-transformer-jax checkpoint is a step_N/ folder of shard_0 .. shard_" +
                std::to_string(m.shards - 1));
  const int64_t S = m.shards;
  std::vector<std::vector<Leaf>> leaves = read_shards(dir, S);
  const std::string shard0 = shard_dir(dir, 0);

  // The step counter closes the list (a scalar); the rest is 2 + 10 per layer + 4 arrays.
  size_t n = leaves[0].size();
  if (n > 0 && leaves[0].back().t.shape.empty()) n -= 1;
  FTX_CHECK(n >= 16 && (n - 6) % 10 == 0, shard0,
            "holds " + std::to_string(leaves[0].size()) + " arrays in its .npz files; a GPT-J slim checkpoint holds "
            "2 + 10 per layer + 4 (and the step): a missing file, or a full checkpoint with opt_state "
            "(slim it with mesh-transformer-jax's slim_model.py)");
  const int64_t L = static_cast<int64_t>((n - 6) / 10);

  // Names, in file order, for messages.
  std::vector<std::string> layer_order;
  for (int64_t i = 0; i < L; ++i) layer_order.push_back(std::to_string(i));
  std::sort(layer_order.begin(), layer_order.end());  // tree_flatten's order of "layer_N" keys
  std::vector<std::string> what = {"embedding_shard/~/linear/b (wte bias)", "embedding_shard/~/linear/w (wte)"};
  for (const std::string& l : layer_order)
    for (const char* p : kLayerParams) what.push_back("layer_" + l + "/~/" + p);
  for (const char* p : {"projection_shard/~/linear/b (lm_head bias)", "projection_shard/~/linear/w (lm_head)",
                        "projection_shard/~/replicated_layer_norm/offset (ln_f bias)",
                        "projection_shard/~/replicated_layer_norm/scale (ln_f weight)"})
    what.push_back(p);

  // Sizes from shard_0's embedding ([V/S, d]) and first layer's fc_in ([d, I/S]).
  const TensorView& wte0 = leaves[0][1].t;
  const TensorView& fc0 = leaves[0][2 + 5].t;
  FTX_CHECK(wte0.shape.size() == 2, leaves[0][1].origin,
            what[1] + " has shape " + shape_to_string(wte0.shape) + ", not [vocabulary / shards, d_model]");
  FTX_CHECK(fc0.shape.size() == 2, leaves[0][7].origin,
            what[7] + " has shape " + shape_to_string(fc0.shape) + ", not [d_model, inter / shards]");
  const int64_t d = wte0.shape[1], Vs = wte0.shape[0], Is = fc0.shape[1];
  FTX_CHECK(d > 0 && Vs > 0 && Is > 0, leaves[0][1].origin, "empty embedding or fc_in");
  FTX_CHECK(d % S == 0, leaves[0][1].origin,
            "d_model " + std::to_string(d) + " is not a multiple of the " + std::to_string(S) + " shards");
  FTX_CHECK(m.head_num % S == 0 && d % m.head_num == 0, dir,
            "--head-num " + std::to_string(m.head_num) + " does not fit d_model " + std::to_string(d) + " over " +
                std::to_string(S) + " shards (the heads must divide d_model and be a multiple of the shards)");
  const int64_t head = d / m.head_num;
  FTX_CHECK(m.rotary_dim > 0 && m.rotary_dim <= head && m.rotary_dim % 2 == 0, dir,
            "--rotary-dim " + std::to_string(m.rotary_dim) + " is not an even number in [2, " + std::to_string(head) +
                "] (the head size)");
  const std::string sizes = "d_model " + std::to_string(d) + ", inter_size " + std::to_string(Is * S) +
                            " and vocabulary " + std::to_string(Vs * S) + " over " + std::to_string(S) +
                            " shards, as shard_0's embedding and first fc_in give them";

  // Every array of every shard: a float of the shape its place says.
  std::vector<std::vector<int64_t>> want = {{d}, {Vs, d}};
  for (int64_t l = 0; l < L; ++l) {
    const std::vector<std::vector<int64_t>> layer = {{d, d / S}, {d, d / S}, {d, d / S}, {d / S, d}, {Is},
                                                     {d, Is},    {d},        {Is, d},    {d},        {d}};
    want.insert(want.end(), layer.begin(), layer.end());
  }
  for (const std::vector<int64_t>& s : std::vector<std::vector<int64_t>>{{Vs}, {d, Vs}, {d}, {d}}) want.push_back(s);
  for (int64_t s = 0; s < S; ++s)
    for (size_t i = 0; i < n; ++i) {
      const Leaf& f = leaves[static_cast<size_t>(s)][i];
      check_float_weight(f.t, f.origin + " (" + what[i] + ")");
      FTX_CHECK(f.t.shape == want[i], f.origin,
                what[i] + " has shape " + shape_to_string(f.t.shape) + ", expected " + shape_to_string(want[i]) +
                    " (" + sizes + ")");
    }

  ConversionPlan plan;
  ModelConfig& c = plan.cfg;
  c.ft_variant = FtVariant::kGptJ;
  c.model_name = "gptj";
  c.head_num = c.kv_head_num = m.head_num;
  c.size_per_head = head;
  c.inter_size = Is * S;
  c.num_layer = L;
  c.vocab_size = Vs * S;
  c.max_pos_seq_len = m.max_pos;
  c.position = PositionEmbedding::kRotary;
  c.rotary_style = RotaryStyle::kInterleaved;  // layers.py's rotate_every_two
  c.rotary_dim = m.rotary_dim;
  c.parallel_residual = true;
  c.shared_input_norm = true;
  c.tied_embeddings = false;
  c.has_lm_head_bias = true;
  c.activation = Activation::kGeluTanh;  // jax.nn.gelu's default approximation
  c.layernorm_eps = 1e-5;               // ReplicatedLayerNorm's
  c.start_id = c.end_id = 50256;        // GPT-2's <|endoftext|>, GPT-J's tokenizer
  add_gpt2_tokenizer_files(plan, opt);
  plan.source_format = "mesh-transformer-jax";
  plan.source_path = dir;

  auto across = [&](size_t i) {
    std::vector<TensorView> v;
    for (const auto& shard : leaves) v.push_back(shard[i].t);
    return v;
  };
  auto source = [&](size_t i) { return leaves[0][i].origin + " .. shard_" + std::to_string(S - 1) + " (" + what[i] + ")"; };
  auto add = [&](const std::string& name, size_t i, int merge, OutSplit split, bool transpose = false) {
    TensorJob j;
    j.name = name;
    j.source = source(i);
    j.shards = merge < 0 ? std::vector<TensorView>{leaves[0][i].t} : across(i);
    j.merge_axis = merge;
    j.split = split;
    j.transpose = transpose;
    plan.jobs.push_back(std::move(j));
  };
  auto add_tensor = [&](const std::string& name, TensorView t, size_t i) {
    TensorJob j;
    j.name = name;
    j.source = source(i);
    j.shards = {std::move(t)};
    plan.jobs.push_back(std::move(j));
  };

  add_tensor("model.wte", rows_plus(across(1), sum_tensors(across(0), source(0)), source(1)), 1);
  for (int64_t p = 0; p < L; ++p) {
    const size_t b = 2 + 10 * static_cast<size_t>(p);
    const std::string fl = "model.layers." + layer_order[static_cast<size_t>(p)] + ".";
    TensorJob qkv;  // q | k | v ([d, d/S] per shard), each of the three split over the ranks
    qkv.name = fl + "attention.query_key_value.weight";
    qkv.source = source(b) + ", " + what[b + 2] + ", " + what[b + 1];
    for (size_t part : {b, b + 2, b + 1})
      for (TensorView& t : across(part)) qkv.shards.push_back(std::move(t));
    qkv.merge_axis = 1;
    qkv.seg_sizes = {d, d, d};
    qkv.split = OutSplit::kColumn;
    plan.jobs.push_back(std::move(qkv));
    add(fl + "attention.dense.weight", b + 3, 0, OutSplit::kRow);
    add(fl + "mlp.dense_h_to_4h.bias", b + 4, 1, OutSplit::kColumn);
    add(fl + "mlp.dense_h_to_4h.weight", b + 5, 1, OutSplit::kColumn);
    add_tensor(fl + "mlp.dense_4h_to_h.bias", sum_tensors(across(b + 6), source(b + 6)), b + 6);
    add(fl + "mlp.dense_4h_to_h.weight", b + 7, 0, OutSplit::kRow);
    add(fl + "input_layernorm.bias", b + 8, -1, OutSplit::kReplicated);
    add(fl + "input_layernorm.weight", b + 9, -1, OutSplit::kReplicated);
  }
  const size_t t = 2 + 10 * static_cast<size_t>(L);
  add("model.lm_head.bias", t, 0, OutSplit::kReplicated);
  add("model.lm_head.weight", t + 1, 0, OutSplit::kReplicated, /*transpose=*/true);
  add("model.final_layernorm.bias", t + 2, -1, OutSplit::kReplicated);
  add("model.final_layernorm.weight", t + 3, -1, OutSplit::kReplicated);
  return plan;
}

}  // namespace ftx
