// The scheduler's progress guarantee: every plan starts a request, resumes a preempted one, consumes
// a control request, or finds some request running (which then takes a step); otherwise nothing
// would ever change and the run would plan the same nothing for ever. Under a KV-cache budget the
// planner frees what it can before that (idle sessions give way to preempted requests), so a plan
// that still moves nothing means a request that cannot fit: an Error naming it, on every rank
// (plan() turns it into the plan's error). See scheduler.h.
#include <string>

#include "formats/error.h"
#include "lib/engine/scheduler.h"
#include "lib/engine/scheduler_plan.h"

namespace ftx {

std::string request_name(int64_t index, const std::string& session) {
  return "request " + std::to_string(index + 1) + (session.empty() ? "" : " (session \"" + session + "\")");
}

void Scheduler::check_progress(const Plan& p, size_t consumed) const {
  if ((p.flags & Plan::kEnd) || !p.slot.empty() || !p.resume.empty() || consumed > 0) return;
  int64_t waiting = -1;  // the oldest preempted request
  for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
    if (running(s)) return;
    if (slots_[s].used && (waiting < 0 || slots_[s].admitted < slots_[waiting].admitted)) waiting = s;
  }
  if (waiting >= 0) {
    const Slot& w = slots_[static_cast<size_t>(waiting)];
    std::string need = "it needs more blocks of the KV cache than are free";
    if (blocked_.slot == waiting)
      need = "its " + std::to_string(w.steps) + " new tokens so far and the next need " + std::to_string(blocked_.want) +
             " blocks of " + std::to_string(engine_.kv_cache().block_size()) + " tokens, " +
             std::to_string(blocked_.room) + " are free";
    throw Error(request_name(w.index, w.session) + ": preempted when the KV cache ran out and cannot run again: " + need +
                " with nothing else running and no idle session left to evict (raise --kv-cache-memory)");
  }
  // Nothing is decoding: a request left waiting now would wait for ever (an interactive source
  // with nothing pending is waiting for its user, which is fine).
  if (!pending_.empty())
    throw Error(request_name(pending_.front().index, pending_.front().session) +
                ": cannot start with nothing running (the scheduler found no rows or KV-cache blocks for it)");
}

}  // namespace ftx
