#pragma once
// Per-architecture layout tables: source tensor name -> FT name, role (how it is split), transpose.
// Adapters first normalise their source names (strip `transformer.`/`model.language_model.`,
// renumber pipeline layers to global indices), then look them up here. Adding an architecture is a
// new table (and its tests), not a new converter.
#include <optional>
#include <string>
#include <vector>

#include "lib/convert/tensor_job.h"

namespace ftx {

enum class Role {
  kReplicated,    // same on every training rank (rank 0 is read) and every inference rank
  kVocab,         // vocab-parallel in training (concatenate shards on axis 0), replicated in FT
  kColumn,        // column-parallel: merge and split on the last axis (after transpose)
  kColumnGated,   // kColumn; for gated activations the source holds [up | gate] per shard
  kRow,           // row-parallel: merge and split on axis 0 (after transpose)
  kQkv,           // fused QKV: kColumn in 3 segments, reordered to FT's [Q | K | V] per rank
};

struct LayoutRule {
  std::string pattern;  // ECMAScript regex over the normalised source name, anchored
  std::string ft_name;  // std::regex_replace format ($1 ...)
  Role role;
  bool transpose;       // 2-D tensors stored [out, in] (nn.Linear, Megatron)
  // >= 0: one of several source tensors that make up one FT tensor (GPT-J/OPT/XGLM q_proj = 0,
  // k_proj = 1, v_proj = 2); the adapter gathers them in part order (JobContext::separate_qkv).
  int part = -1;
};

struct ArchLayout {
  std::string name;
  std::vector<LayoutRule> rules;
  std::vector<std::string> skip;  // regexes of tensors that are not weights (buffers, caches)
};

// Megatron-LM GPT and NeMo GPT (names after `language_model.`/`encoder.`|`transformer.` are removed).
const ArchLayout& megatron_gpt_layout();
// Megatron Core GPT (Megatron-LM --use-mcore-models, NeMo mcore_gpt), names without `decoder.`
// (and NeMo's `model.`): the local layer spec's and TransformerEngine's (norms fused into
// linear_qkv / linear_fc1 as layer_norm_weight/bias; `_extra_state` skipped).
const ArchLayout& mcore_gpt_layout();
// The HuggingFace families' tables are defined in their files, lib/convert/hf/<family>.cc.
// HF GPT-2 (Conv1D, [in, out]) and GPTBigCode (nn.Linear, [out, in]); names without `transformer.`.
const ArchLayout& hf_gpt2_layout();
const ArchLayout& hf_gpt_bigcode_layout();
// HF GPT-J (names without `transformer.`), GPT-NeoX (without `gpt_neox.`), BLOOM (without
// `transformer.`), OPT (without `model.decoder.`), XGLM (without `model.`). Tensors FT computes
// from several sources (OPT embed_tokens with project_in/out, XGLM embed_tokens, GPT-NeoX's summed
// biases) are handled by the family (lib/convert/hf/<family>.cc), not by rules.
const ArchLayout& hf_gptj_layout();
const ArchLayout& hf_gpt_neox_layout();
const ArchLayout& hf_bloom_layout();
const ArchLayout& hf_opt_layout();
const ArchLayout& hf_xglm_layout();

struct RuleMatch {
  std::string ft_name;
  const LayoutRule* rule;
};
// nullopt when the name matches a skip pattern; Error(origin, "unexpected tensor ...") when no rule matches.
std::optional<RuleMatch> match_layout(const ArchLayout& layout, const std::string& name, const std::string& origin);
// Whether the name matches one of the layout's skip patterns (buffers such as GPT-2's attn.bias
// mask, which may be integer or boolean tensors).
bool layout_skips(const ArchLayout& layout, const std::string& name);

// Error(source, ...) naming the dtype unless `t` holds floating-point numbers. Every weight of
// these models is a float: an integer or boolean tensor in its place (I32, U8, BOOL, ...) is a
// broken file, whose integers cast to float would be another model's values.
void check_float_weight(const TensorView& t, const std::string& source);

// What the job builder needs to know about the model and the source.
struct JobContext {
  int64_t heads_per_shard = 0;  // attention heads in one training shard
  int64_t head_dim = 0;
  int64_t hidden = 0;
  QkvOrder qkv = QkvOrder::kQkvMajor;
  bool gated = false;           // swiglu/geglu: split dense_h_to_4h into up and gate
  bool layernorm1p = false;     // NeMo: weights stored as w - 1
  bool multi_query = false;     // QKV columns [H | d | d], K and V replicated on every rank
  bool separate_qkv = false;    // QKV arrives as three [H, H] tensors (q, k, v) given as the shards
  // Megatron Core: QKV rows grouped per query group ([g_l, n_l/g_l + 2, d], QkvOrder::kGroupQkv);
  // the query groups (K/V heads) per shard. With one group in all (multi-query) K and V are copied
  // whole to every inference rank.
  int64_t qkv_groups = 0;
  bool single_kv_head = false;
};

// Appends the job(s) for one source tensor (two for a gated dense_h_to_4h). Each shard must be a
// float tensor (check_float_weight).
void add_layout_jobs(const RuleMatch& m, std::vector<TensorView> shards, const std::string& source,
                     const JobContext& ctx, std::vector<TensorJob>& out);

}  // namespace ftx
