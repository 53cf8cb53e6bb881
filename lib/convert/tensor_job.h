#pragma once
// One output tensor of a conversion: which source shards it is built from and how (transpose, QKV
// reorder, swiglu half, layernorm1p), how the training TP shards merge into the full tensor, and
// how the full tensor is split over the inference TP ranks (docs/ft-layout.md#splitting-over-tp-ranks).
// Every converter reduces to a list of these; run_tensor_job is the only place that moves numbers.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/tensor.h"

namespace ftx {

// Order of the QKV output features inside ONE training shard (n_l heads of size d). FT wants
// [3, n_l, d] (all Q, then K, then V). Megatron v0 and HF GPT-2 already are; Megatron v1 is
// [n_l, d, 3]; Megatron v2/v3 and NeMo are [n_l, 3, d] (ML fix_query_key_value_ordering).
// Megatron Core groups the rows per query group: [g_l, n_l/g_l + 2, d] (the group's query heads,
// then its K and its V head), which becomes [Q (n_l·d) | K (g_l·d) | V (g_l·d)].
enum class QkvOrder { kNone, kQkvMajor, kHeadDimQkv, kHeadQkv, kGroupQkv };

// How the output is split over inference ranks.
enum class OutSplit {
  kReplicated,  // one file, no rank suffix
  kRow,         // axis 0
  kColumn,      // last axis, per segment (see TensorJob::segments)
};

struct TensorJob {
  std::string name;                // FT name without rank and ".bin"
  std::string source;              // human-readable source name for errors ("mp_rank_01:...")
  std::vector<TensorView> shards;  // training TP shards, in rank order (1 when not sharded)
  // How shards combine into the full tensor: -1 = take shards[0] only (replicated in training),
  // 0 = concatenate on axis 0, 1 = concatenate on the last axis (segment by segment, see below).
  int merge_axis = -1;
  // With merge_axis 1: the pieces may differ in their last axis (SantaCoder q_attn + kv_attn);
  // otherwise every training shard must have the same shape.
  bool ragged_last = false;
  bool transpose = false;          // 2-D [out, in] -> [in, out] (nn.Linear / Megatron layout)
  int take_half = -1;              // 0/1: keep the first/second half of the last axis (NeMo swiglu)
  QkvOrder qkv = QkvOrder::kNone;  // reorder of the last axis, per shard (needs qkv_heads, head_dim)
  int64_t qkv_heads = 0;           // heads per training shard
  int64_t qkv_groups = 0;          // kGroupQkv: query groups (= K/V heads) per training shard
  int64_t head_dim = 0;
  float add = 0.f;                 // added to every element (NeMo layernorm1p weights)
  // Last-axis segments of each shard (after the steps above). Merging concatenates segment k of
  // every shard; the column split cuts every `split` segment into tp parts and copies the others
  // whole onto every rank (multi-query K and V). Empty = one split segment.
  // For QKV: 3 equal split segments. For MQA [Q | K | V]: {H split, d whole, d whole}.
  int segments = 0;                       // number of equal segments per shard (0 = use seg_sizes)
  std::vector<int64_t> seg_weights;       // with `segments`: relative widths (GQA [Q | K | V]: {n/g, 1, 1})
  std::vector<int64_t> seg_sizes;         // explicit full-tensor sizes (Tt = 1 only)
  std::vector<bool> seg_split;            // per segment; empty = all split
  OutSplit split = OutSplit::kReplicated;
  // The shards are the experts of a mixture-of-experts layer, `expert_shards` consecutive ones each
  // (an expert's training shards, merged by merge_axis; 1: the expert whole, merge_axis ignored):
  // the steps above and the split run on each expert alone, and each output file stacks the
  // experts' pieces on a new axis 0 ([E, ...], FT's GPT-MoE expert files).
  bool stack_experts = false;
  int64_t expert_shards = 1;
  // With stack_experts: the experts whole, not split, in contiguous blocks over the ranks (expert
  // parallelism: rank r's file stacks experts [r·E/tp, (r+1)·E/tp); E must divide).
  bool whole_experts = false;
};

// The bytes of one output file. `data` may point into the source checkpoint (when no element
// changes) or into a buffer of run_tensor_job: valid only during the `emit` call.
struct JobOutput {
  int64_t rank;                 // -1 for replicated
  std::vector<int64_t> shape;   // after split
  const uint8_t* data;          // little-endian, in the output dtype
  size_t nbytes;
};

// Runs a job: reads the shards (any dtype, any strides), merges them, splits over `tp` ranks and
// casts to `out` (fp32, fp16 or bf16; round to nearest even, as numpy's astype and torch's .to()).
// Every step but the cast is a permutation of elements, so it is done on the output dtype's bytes:
// a shard already in `out` is never widened, and one that needs no reordering is never copied.
// Calls `emit` once per output file. Throws Error naming job.name and job.source when shard shapes
// disagree or a split does not divide.
void run_tensor_job(const TensorJob& job, int64_t tp, DType out, const std::function<void(const JobOutput&)>& emit);

}  // namespace ftx
