// ParallelLayout checks and the TP/PP sub-communicators (see parallel.h).
#include "lib/dist/parallel.h"

#include "formats/error.h"

namespace ftx::dist {

ParallelLayout ParallelLayout::resolve(int tp, int pp, int world_size, int rank, int64_t num_layer) {
  if (tp < 0) throw UsageError("--tensor-para-size " + std::to_string(tp) + " is negative");
  if (pp < 0) throw UsageError("--pipeline-para-size " + std::to_string(pp) + " is negative");
  ParallelLayout l;
  l.pp = pp == 0 ? 1 : pp;
  l.tp = tp == 0 ? world_size / l.pp : tp;
  l.rank = rank;
  if (l.tp < 1 || static_cast<int64_t>(l.tp) * l.pp != world_size) {
    const int64_t shown = l.tp < 1 ? 1 : l.tp;  // a defaulted T that rounds to 0 is shown as 1
    throw UsageError("--tensor-para-size " + std::to_string(shown) + " x --pipeline-para-size " + std::to_string(l.pp) +
                     " needs " + std::to_string(shown * l.pp) + " ranks, but this run has " +
                     std::to_string(world_size) + " (mpirun -np)");
  }
  if (num_layer >= 0 && l.pp > num_layer)
    throw UsageError("--pipeline-para-size " + std::to_string(l.pp) + " is more than the model's " +
                     std::to_string(num_layer) + " layers (num_layer in config.ini)");
  return l;
}

std::string ParallelLayout::describe() const {
  return "TP " + std::to_string(tp) + " x PP " + std::to_string(pp);
}

ParallelGroups::ParallelGroups(Communicator& world, ParallelLayout layout)
    : layout_(layout), world_(&world), tp_(&world), pp_(&world) {
  if (layout_.world() != world.size() || layout_.rank != world.rank())
    throw Error("parallel layout " + layout_.describe() + " does not match rank " + std::to_string(world.rank()) +
                " of " + std::to_string(world.size()));
  if (layout_.pp == 1) {  // TP over the whole world; no other stage to talk to
    own_pp_ = std::make_unique<SingleRank>();
    pp_ = own_pp_.get();
    return;
  }
  // Every rank takes part in both splits, in the same order.
  own_tp_ = world.split(layout_.stage(), layout_.tp_rank());
  own_pp_ = world.split(layout_.tp_rank(), layout_.stage());
  tp_ = own_tp_.get();
  pp_ = own_pp_.get();
}

ParallelGroups ParallelGroups::tensor_only(Communicator& world) {
  ParallelLayout l;
  l.tp = world.size();
  l.rank = world.rank();
  return ParallelGroups(world, l);
}

}  // namespace ftx::dist
