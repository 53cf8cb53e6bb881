// Admission (rank 0, planning an iteration): rows of requests that finished give their blocks back,
// preempted requests run again, then requests and session rounds from the look-ahead queue go into
// free or parked slots while slots (and, under a KV-cache budget, blocks) last. See scheduler.h.
#include "lib/engine/scheduler.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "lib/engine/scheduler_plan.h"
#include "lib/engine/sliding_window.h"
#include "lib/model/rope_scaling.h"

namespace ftx {

int64_t Scheduler::take_free_slot(std::vector<int64_t>& free, Plan& p) {
  if (!free.empty()) {
    const int64_t s = free.front();
    free.erase(free.begin());
    return s;
  }
  // No free slot: the least recently used idle session gives up its cache (its context stays).
  return evict_idle_session(p);
}

Scheduler::Admission Scheduler::try_admit(const Request& r, Plan& p, std::vector<int64_t>& free, int64_t beam) {
  // A request is judged only once it could start, so that the results before a bad one come out.
  const auto sit = r.session.empty() ? sessions_.end() : sessions_.find(r.session);
  const bool resident = sit != sessions_.end() && sit->second.slot >= 0;
  const bool evictable = std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.parked; });
  if (!resident && free.empty() && !evictable) return Admission::kWait;
  const std::string who = request_name(r.index, r.session);
  try {
    check_decode_request(r.decode, engine_.vocab_size());
  } catch (const Error& e) {
    throw Error(who + ": " + e.what());
  }
  const std::vector<int32_t>& ids = r.decode.input_ids;
  // What the rows will hold: the session's context and the round's tokens; of it the rows already
  // hold `cached` (a resident session).
  std::vector<int32_t> context;
  int64_t cached = 0;
  if (!r.session.empty()) {
    if (opt_.memory_len > 0 && static_cast<int64_t>(ids.size()) > opt_.memory_len)
      throw Error(who + ": " + std::to_string(ids.size()) + " new tokens exceed --memory-len " +
                  std::to_string(opt_.memory_len) + " (FT requires a round's input to fit the memory)");
    const Session& s = sessions_[r.session];
    const int64_t total = static_cast<int64_t>(s.context.size() + ids.size()) + r.decode.max_new_tokens;
    if (opt_.session_len > 0 && total > opt_.session_len)
      throw Error(who + ": the session would hold " + std::to_string(total) + " tokens (" +
                  std::to_string(s.context.size()) + " so far, " + std::to_string(ids.size()) + " new, " +
                  std::to_string(r.decode.max_new_tokens) + " to generate), more than --session-len " +
                  std::to_string(opt_.session_len));
    if (opt_.max_positions > 0 && total > opt_.max_positions)
      throw Error(who + ": the session would reach position " + std::to_string(total) +
                  ", beyond the model's max_pos_seq_len " + std::to_string(opt_.max_positions));
    context = s.context;
    if (s.slot >= 0) cached = s.cached;
  }
  // The positions this round runs: its tokens' after the context's, and each new token's but the
  // last (never fed).
  const int64_t first = static_cast<int64_t>(context.size());
  const int64_t last = first + static_cast<int64_t>(ids.size()) - 1 + std::max<int64_t>(r.decode.max_new_tokens - 1, 0);
  const int64_t beyond = first_position_beyond_window(engine_.sliding_window(), opt_.memory_len, first, last);
  if (beyond >= 0) throw Error(who + ": " + beyond_window_message(beyond, engine_.sliding_window()));
  if (rope_beyond_original(engine_.rope_scaling(), last + 1))
    throw Error(who + ": " + rope_beyond_original_message(engine_.rope_scaling(), last + 1));
  context.insert(context.end(), ids.begin(), ids.end());
  const int64_t need = static_cast<int64_t>(context.size()) + r.decode.max_new_tokens;
  if (opt_.max_seq_len > 0 && opt_.memory_len == 0 && need > opt_.max_seq_len)
    throw Error(who + ": " + std::to_string(context.size()) + " context tokens + " +
                std::to_string(r.decode.max_new_tokens) + " new tokens exceed --max-seq-len " +
                std::to_string(opt_.max_seq_len));

  // Blocks: a prompt whose first uncached block a newcomer of this plan computes waits a step, to
  // find it cached; with a budget, the prompt and its first step must fit what is free.
  // A scored or embedded prompt takes nothing from the prefix cache (Engine::prefill): every token runs.
  const bool scored = r.output.context_log_probs;
  std::vector<uint64_t> new_keys;
  if (cached == 0 && engine_.kv_cache().sharing() && !r.output.context_embedding && !scored && opt_.continuous) {
    new_keys = engine_.prefill_cost(context).new_keys;
    if (!new_keys.empty() && produced_.count(new_keys.front())) return Admission::kDefer;
  }
  // Its slot, before the blocks: a slot taken from an idle session releases blocks (some perhaps
  // shared with this plan's prompts), which the budget below must see.
  int64_t slot = resident ? sit->second.slot : take_free_slot(free, p);
  if (slot < 0) return Admission::kWait;
  auto wait = [&] {
    if (!resident) free.insert(free.begin(), slot);  // free again (an evicted session stays evicted)
    return Admission::kWait;
  };
  int64_t reserved = 0, step = 0;  // with a budget: the blocks admitting it takes, and of them its first step's
  if (engine_.budgeted()) {
    const int64_t row = resident ? slot * beam : -1;
    auto cost_now = [&] {
      return admission_cost(r, context, cached > 0 ? row : -1, static_cast<int64_t>(context.size()) - cached, beam, who);
    };
    AdmissionCost cost = cost_now();
    // Its prompt and its first step (which runs in this same iteration) must fit. Idle sessions give
    // their blocks back until they do, and the cost is taken again (a block the evicted row shared
    // with this prompt is one to take now).
    while (cost.prompt + cost.step > room(p)) {
      const int64_t left = evict_idle_session(p, r.session);
      if (left < 0) break;
      free.push_back(left);
      cost = cost_now();
    }
    // Alone (nothing running, nothing admitted yet, no idle session left to give way) its first
    // step fits whatever the bound on it says: admission_cost checked its whole length against the pool.
    const bool alone = !any_decoding() && p.slot.empty();
    if (cost.prompt + cost.step > room(p) && !(alone && cost.prompt <= room(p))) {
      if (alone) {
        wait();
        throw Error(who + ": needs " + std::to_string(cost.prompt) + " blocks of the KV cache, " +
                    std::to_string(room(p)) + " are free with nothing running");
      }
      return wait();
    }
    reserved = cost.prompt + cost.step;
    step = cost.step;
  }
  produced_.insert(new_keys.begin(), new_keys.end());

  Slot meta;
  meta.index = r.index;
  meta.fingerprint = r.fingerprint;
  meta.output = r.output;
  // FT's response_input_lengths: the prompt's ids, without a soft prompt's rows.
  meta.input_length = static_cast<int64_t>(ids.size()) - r.soft_prompt.rows;
  meta.session = r.session;
  meta.session_end = r.session_end;
  meta.need = need;
  meta.admitted = ++admissions_;
  Request dec = r;  // what the decoder sees: the whole context, so penalties and stop words span it
  if (!r.session.empty()) {
    Session& s = sessions_[r.session];
    if (resident) slots_[static_cast<size_t>(slot)].parked = false;  // its cache is here: feed only what it does not hold
    else s.cached = 0;
    meta.context_length = static_cast<int64_t>(s.context.size());
    s.context = context;  // the round's tokens join the context; its output follows
    s.slot = slot;
    s.busy = true;
    s.last_used = ++clock_;
    meta.round = ++s.rounds;
  }
  Plan::Run run;
  run.row = static_cast<int32_t>(slot * beam);
  run.append = cached > 0 ? 1 : 0;
  run.score = scored ? 1 : 0;
  run.embed = r.output.context_embedding ? 1 : 0;
  run.feed.assign(context.begin() + cached, context.end());
  dec.decode.input_ids = std::move(context);
  p.slot.push_back(slot);
  p.need.push_back(need);
  p.soft.push_back(r.soft_prompt);
  p.runs.push_back(std::move(run));
  p.requests.push_back(std::move(dec));
  p.meta.push_back(std::move(meta));
  // After the run is in the plan: a slot taken from an idle session above made the room stale, and
  // counting it again then includes this run.
  room_ -= reserved;
  planned_steps_ += step;
  return Admission::kAdmitted;
}

Scheduler::Plan Scheduler::plan(RequestSource* source, const std::function<bool()>& should_stop) {
  Plan p;
  p.beam = beam_;
  if (should_stop && should_stop()) {
    p.flags |= Plan::kStop;
    return p;
  }
  try {
    // Rows of requests that finished in the last step give their blocks back (a session round's
    // best beam moves to its slot's first row).
    std::vector<std::array<int32_t, 3>> ops;
    ops.swap(pending_ops_);
    for (const auto& op : ops) {
      if (op[0] == Plan::kFork) apply_fork(op[1], op[2], p);
      else apply_release(op[1], p);
    }
    produced_.clear();
    // With a budget: the running requests' next step first (preempting the newest when it would not
    // fit), then preempted requests, then newcomers, in what is left.
    room_ = engine_.budgeted() ? make_room(p) : 0;
    room_stale_ = false;
    planned_steps_ = 0;
    bool waiting = false;
    if (engine_.budgeted()) resume_preempted(p, &waiting);
    const bool decoding = any_decoding();
    // Look ahead a little, so that a session's next round waiting for its previous one does not
    // hold up the requests behind it.
    const size_t window = static_cast<size_t>(std::max<int64_t>(16, 2 * opt_.batch_size));
    while (pending_.size() < window) {
      const Request* r = source->peek();
      if (!r) break;
      pending_.push_back(source->take());
    }
    size_t consumed = 0;  // control requests done
    if ((opt_.continuous || !decoding) && !waiting) {
      std::vector<int64_t> free;
      for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s)
        if (!slots_[s].used && !slots_[s].parked) free.push_back(s);
      // Sessions with a request passed over in this plan (its previous round still running, or a
      // round deferred a step for a prefix block another newcomer computes): their later requests
      // wait behind it, so that a session's rounds and its end run in input order.
      std::unordered_set<std::string> held;
      for (size_t i = 0; i < pending_.size();) {
        const Request& r = pending_[i];
        if (!r.session.empty() && held.count(r.session)) {
          ++i;
          continue;
        }
        auto sit = r.session.empty() ? sessions_.end() : sessions_.find(r.session);
        const bool busy = sit != sessions_.end() && sit->second.busy;
        if (r.is_control()) {
          // Under a budget a session ends before anything is admitted, or waits for the next plan:
          // its blocks may be shared with the prompts admitted already, whose cost would change.
          if (!busy && engine_.budgeted() && !p.slot.empty()) break;
          if (!busy) {
            end_session(r.session, p);
            pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
            ++consumed;
          } else {
            held.insert(r.session);
            ++i;
          }
          continue;
        }
        const int64_t k = r.decode.sampling.beam_width;
        if (k != p.beam) {
          // Beam width is one value per batch: a request with another one waits for the running
          // requests to finish, then starts a batch of its own width. The row layout changes, so
          // idle sessions lose their caches.
          if (decoding || !p.slot.empty()) break;
          for (auto& kv : sessions_)
            if (kv.second.slot >= 0) {
              slots_[static_cast<size_t>(kv.second.slot)].parked = false;
              apply_release(kv.second.slot * p.beam, p);
              kv.second.slot = -1;
              kv.second.cached = 0;
            }
          p.beam = k;
          room_stale_ = true;  // every cache row was released: counted again at the next look
          free.clear();
          for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) free.push_back(s);
        }
        if (busy) {  // the session's previous round is still running
          held.insert(r.session);
          ++i;
          continue;
        }
        Admission a = Admission::kWait;
        try {
          a = try_admit(r, p, free, p.beam);
        } catch (const Error& e) {
          if (!opt_.refuse_alone) throw;
          GenerationOutput out;  // try_admit refuses before it changes the session
          out.index = r.index;
          out.fingerprint = r.fingerprint;
          out.session = r.session;
          out.error = e.what();
          p.refused.push_back(std::move(out));
          pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
          ++consumed;
          continue;
        }
        if (a == Admission::kWait) break;
        if (a == Admission::kDefer) {
          if (!r.session.empty()) held.insert(r.session);
          ++i;
          continue;
        }
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (p.slot.empty() && p.resume.empty() && !decoding && pending_.empty() && source->finished())
      p.flags |= Plan::kEnd;
    check_progress(p, consumed);
  } catch (const Error& e) {
    p.flags |= Plan::kError;
    p.error = e.what();
  }
  return p;
}

}  // namespace ftx
