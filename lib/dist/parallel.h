#pragma once
// FasterTransformer's rank grid for tensor (TP) × pipeline (PP) parallelism:
// world rank r is TP rank r mod T of pipeline stage r / T, so the T ranks of a stage are adjacent
// (one node's GPUs under mpirun's default by-slot mapping) and stages span nodes.
//
// Layers: stage p holds layers [p·L/P, (p+1)·L/P) (integer division). When P divides L every stage
// holds L/P layers, as in FT; otherwise the stages differ by at most one layer and the later stages
// hold the extra ones (FT instead requires L % P == 0). Stage 0 holds the embeddings, the last stage
// the final layernorm and the lm_head.
#include <cstdint>
#include <memory>
#include <string>

#include "lib/dist/communicator.h"

namespace ftx::dist {

struct ParallelLayout {
  int tp = 1, pp = 1;  // tensor- and pipeline-parallel sizes
  int rank = 0;        // world rank

  int world() const { return tp * pp; }
  int tp_rank() const { return rank % tp; }
  int stage() const { return rank / tp; }
  bool first_stage() const { return stage() == 0; }
  bool last_stage() const { return stage() == pp - 1; }
  // World rank of TP rank `t` of stage `p`.
  int world_rank(int p, int t) const { return p * tp + t; }
  // This stage's layers [first_layer, end_layer) of a model with `num_layer` layers.
  int64_t first_layer(int64_t num_layer) const { return stage() * num_layer / pp; }
  int64_t end_layer(int64_t num_layer) const { return (stage() + 1) * num_layer / pp; }

  // From the flags (0 = default: P = 1, T = world / P) and the world size. Throws UsageError, the
  // same one-line message on every rank, when T·P is not the world size or P exceeds num_layer
  // (num_layer < 0: not checked).
  static ParallelLayout resolve(int tp, int pp, int world_size, int rank, int64_t num_layer);
  std::string describe() const;  // "TP 2 x PP 2"
};

// The communicators of one rank: the world (the scheduler's broadcasts), its stage's TP group
// (all-reduces) and its PP group (the ranks of the same TP rank across stages: inter-stage sends;
// PP-group rank = stage). Groups of one rank are the world itself rather than a split copy, so a
// TP-only run keeps exactly one communicator (and one NCCL communicator on a GPU).
class ParallelGroups {
 public:
  // Collective over `world` (splits it). `world` must outlive the groups.
  ParallelGroups(Communicator& world, ParallelLayout layout);
  // TP over the whole world, one stage (what a run without --pipeline-para-size gets).
  static ParallelGroups tensor_only(Communicator& world);

  const ParallelLayout& layout() const { return layout_; }
  Communicator& world() const { return *world_; }
  Communicator& tp() const { return *tp_; }
  Communicator& pp() const { return *pp_; }

 private:
  ParallelLayout layout_;
  Communicator* world_;
  Communicator *tp_, *pp_;
  std::unique_ptr<Communicator> own_tp_, own_pp_;
};

}  // namespace ftx::dist
