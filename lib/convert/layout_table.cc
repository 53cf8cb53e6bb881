#include "lib/convert/layout_table.h"

#include <memory>
#include <mutex>
#include <regex>

#include "formats/error.h"

namespace ftx {

namespace {

// One compiled regex per rule, built once per table.
struct Compiled {
  std::vector<std::regex> rules, skip;
};

const Compiled& compiled(const ArchLayout& l) {
  static std::mutex mu;
  static std::vector<std::pair<const ArchLayout*, std::unique_ptr<Compiled>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (auto& c : cache)
    if (c.first == &l) return *c.second;
  auto c = std::make_unique<Compiled>();
  for (auto& r : l.rules) c->rules.emplace_back("^" + r.pattern + "$");
  for (auto& s : l.skip) c->skip.emplace_back("^" + s + "$");
  cache.emplace_back(&l, std::move(c));
  return *cache.back().second;
}

const std::string kL = R"(layers\.(\d+)\.)";
const std::string kFL = "model.layers.$1.";

}  // namespace

const ArchLayout& megatron_gpt_layout() {
  static const ArchLayout l{
      "megatron-gpt",
      {
          {R"(embedding\.word_embeddings\.weight)", "model.wte", Role::kVocab, false},
          {R"(embedding\.position_embeddings\.weight)", "model.wpe", Role::kReplicated, false},
          {R"(output_layer\.weight)", "model.lm_head.weight", Role::kVocab, false},
          {R"(final_layernorm\.(weight|bias))", "model.final_layernorm.$1", Role::kReplicated, false},
          {kL + R"(input_layernorm\.(weight|bias))", kFL + "input_layernorm.$2", Role::kReplicated, false},
          {kL + R"((?:self_attention|attention)\.query_key_value\.(weight|bias))",
           kFL + "attention.query_key_value.$2", Role::kQkv, true},
          {kL + R"((?:self_attention|attention)\.dense\.weight)", kFL + "attention.dense.weight", Role::kRow, true},
          {kL + R"((?:self_attention|attention)\.dense\.bias)", kFL + "attention.dense.bias", Role::kReplicated, false},
          {kL + R"(post_attention_layernorm\.(weight|bias))", kFL + "post_attention_layernorm.$2", Role::kReplicated, false},
          {kL + R"(mlp\.dense_h_to_4h\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumnGated, true},
          {kL + R"(mlp\.dense_4h_to_h\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, true},
          {kL + R"(mlp\.dense_4h_to_h\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
      },
      {R"(.*\._extra_state)", R"(.*rotary_emb\.inv_freq)", R"(.*\.inv_freq)"}};
  return l;
}

const ArchLayout& mcore_gpt_layout() {
  static const ArchLayout l{
      "mcore-gpt",
      {
          {R"(embedding\.word_embeddings\.weight)", "model.wte", Role::kVocab, false},
          {R"(embedding\.position_embeddings\.weight)", "model.wpe", Role::kReplicated, false},
          {R"(output_layer\.weight)", "model.lm_head.weight", Role::kVocab, false},
          {R"(final_layernorm\.(weight|bias))", "model.final_layernorm.$1", Role::kReplicated, false},
          {kL + R"(input_layernorm\.(weight|bias))", kFL + "input_layernorm.$2", Role::kReplicated, false},
          {kL + R"(self_attention\.linear_qkv\.layer_norm_(weight|bias))", kFL + "input_layernorm.$2",
           Role::kReplicated, false},
          {kL + R"(self_attention\.linear_qkv\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true},
          {kL + R"(self_attention\.linear_proj\.weight)", kFL + "attention.dense.weight", Role::kRow, true},
          {kL + R"(self_attention\.linear_proj\.bias)", kFL + "attention.dense.bias", Role::kReplicated, false},
          {kL + R"(pre_mlp_layernorm\.(weight|bias))", kFL + "post_attention_layernorm.$2", Role::kReplicated, false},
          {kL + R"(mlp\.linear_fc1\.layer_norm_(weight|bias))", kFL + "post_attention_layernorm.$2",
           Role::kReplicated, false},
          {kL + R"(mlp\.linear_fc1\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumnGated, true},
          {kL + R"(mlp\.linear_fc2\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, true},
          {kL + R"(mlp\.linear_fc2\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
          // A layer of experts' router [E, H] (its experts: lib/convert/mcore_experts.h).
          {kL + R"(mlp\.router\.weight)", kFL + "mlp.moe.gate.wg.weight", Role::kReplicated, true},
      },
      {R"(.*\._extra_state(/.*)?)", R"(.*\.inv_freq)"}};
  return l;
}

std::optional<RuleMatch> match_layout(const ArchLayout& layout, const std::string& name, const std::string& origin) {
  const Compiled& c = compiled(layout);
  if (layout_skips(layout, name)) return std::nullopt;
  for (size_t i = 0; i < c.rules.size(); ++i) {
    if (std::regex_match(name, c.rules[i]))
      return RuleMatch{std::regex_replace(name, c.rules[i], layout.rules[i].ft_name), &layout.rules[i]};
  }
  throw Error(origin, "unexpected tensor '" + name + "' for layout " + layout.name +
                          " (adapters, MoE and other extra weights are not supported)");
}

bool layout_skips(const ArchLayout& layout, const std::string& name) {
  for (auto& s : compiled(layout).skip)
    if (std::regex_match(name, s)) return true;
  return false;
}

void check_float_weight(const TensorView& t, const std::string& source) {
  FTX_CHECK(dtype_is_float(t.dtype), source,
            std::string("dtype ") + dtype_name(t.dtype) + " where a floating-point weight belongs (an integer or "
            "boolean tensor in a float model is a broken file; its values cast to float would be another model)");
}

void add_layout_jobs(const RuleMatch& m, std::vector<TensorView> shards, const std::string& source,
                     const JobContext& ctx, std::vector<TensorJob>& out) {
  for (size_t k = 0; k < shards.size(); ++k)
    check_float_weight(shards[k], shards.size() == 1 ? source
                                                     : source + " (piece " + std::to_string(k + 1) + " of " +
                                                           std::to_string(shards.size()) + ")");
  TensorJob j;
  j.name = m.ft_name;
  j.source = source;
  j.transpose = m.rule->transpose && !shards.empty() && shards[0].shape.size() == 2;
  j.shards = std::move(shards);
  switch (m.rule->role) {
    case Role::kReplicated:
      j.merge_axis = -1;
      j.split = OutSplit::kReplicated;
      break;
    case Role::kVocab:
      j.merge_axis = 0;
      j.split = OutSplit::kReplicated;
      break;
    case Role::kRow:
      j.merge_axis = 0;
      j.split = OutSplit::kRow;
      break;
    case Role::kColumn:
    case Role::kColumnGated:
      j.merge_axis = 1;
      j.split = OutSplit::kColumn;
      break;
    case Role::kQkv:
      j.merge_axis = 1;
      j.split = OutSplit::kColumn;
      if (ctx.separate_qkv) {
        // q, k, v ([H, H] each after the transpose, or [H] biases) are the shards: concatenated
        // on the last axis they are [Q | K | V], then each of the three is split over the ranks.
        j.seg_sizes = {ctx.hidden, ctx.hidden, ctx.hidden};
      } else if (ctx.qkv_groups > 0) {
        j.segments = 3;
        j.qkv = QkvOrder::kGroupQkv;
        j.qkv_heads = ctx.heads_per_shard;
        j.qkv_groups = ctx.qkv_groups;
        j.head_dim = ctx.head_dim;
        j.seg_weights = {ctx.qkv_groups > 0 ? ctx.heads_per_shard / ctx.qkv_groups : 1, 1, 1};
        if (ctx.single_kv_head) j.seg_split = {true, false, false};
      } else if (ctx.multi_query) {
        // [Q (H) | K (d) | V (d)]: only Q is split; SantaCoder's q_attn + kv_attn arrive as two
        // "shards" concatenated on the last axis.
        j.seg_sizes = {ctx.hidden, ctx.head_dim, ctx.head_dim};
        j.ragged_last = true;
        j.seg_split = {true, false, false};
      } else {
        j.segments = 3;
        j.qkv = ctx.qkv;
        j.qkv_heads = ctx.heads_per_shard;
        j.head_dim = ctx.head_dim;
      }
      break;
  }
  // NeMo layernorm1p stores (gamma - 1); FT wants gamma (TL utils/nemo.py adds 1).
  if (ctx.layernorm1p && j.name.size() > 16 && j.name.compare(j.name.size() - 16, 16, "layernorm.weight") == 0)
    j.add = 1.f;
  if (m.rule->role == Role::kColumnGated && ctx.gated) {
    // Each training shard holds [up | gate] on its output axis (TL nemo: first half -> dense_h_to_4h,
    // second half -> dense_h_to_4h.gate).
    TensorJob gate = j;
    j.take_half = 0;
    gate.take_half = 1;
    const std::string stem = "mlp.dense_h_to_4h.";
    gate.name.replace(gate.name.find(stem), stem.size(), stem + "gate.");
    out.push_back(std::move(j));
    out.push_back(std::move(gate));
    return;
  }
  out.push_back(std::move(j));
}

}  // namespace ftx
