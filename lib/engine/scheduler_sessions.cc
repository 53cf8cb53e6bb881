// Sessions (rank 0): a finished round leaves the session parked in its slot, its best beam's row
// holding the context; a last round or a control request ends it; --resume restores one. (An
// idle session losing its cache to make room: scheduler_memory.cc.) See scheduler.h.
#include "lib/engine/scheduler.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/engine/scheduler_plan.h"

namespace ftx {

void Scheduler::restore_session(const std::string& session, std::vector<int32_t> context, int64_t rounds) {
  Session& s = sessions_[session];
  s = Session();
  s.context = std::move(context);
  s.rounds = rounds;
}

void Scheduler::end_session(const std::string& id, Plan& p) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  if (it->second.slot >= 0) {
    slots_[static_cast<size_t>(it->second.slot)].parked = false;
    apply_release(it->second.slot * p.beam, p);
  }
  sessions_.erase(it);
}

void Scheduler::finish_round(int64_t s, int64_t best_beam, const GenerationOutput& out) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  auto it = sessions_.find(slot.session);
  if (it == sessions_.end()) return;
  Session& sess = it->second;
  if (slot.session_end) {
    sessions_.erase(it);
    return;
  }
  // The session goes on from its best beam: its tokens join the context, its row is kept (as the
  // slot's first row; the other beams' rows are released).
  const int64_t best_row = s * beam_ + best_beam;
  const std::vector<int32_t>& best = out.result.beams.front().output_ids;
  sess.context.insert(sess.context.end(), best.begin(), best.end());
  sess.cached = engine_.row_length(best_row);
  if (best_row != s * beam_) pending_ops_.push_back({Plan::kFork, static_cast<int32_t>(s * beam_), static_cast<int32_t>(best_row)});
  for (int64_t k = 1; k < beam_; ++k) pending_ops_.push_back({Plan::kRelease, static_cast<int32_t>(s * beam_ + k), 0});
  sess.busy = false;
  sess.slot = s;
  slot.parked = true;
  parked_by_[static_cast<size_t>(s)] = slot.session;
}

}  // namespace ftx
