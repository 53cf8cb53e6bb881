// The scheduler's side of a fixed KV-cache budget (Engine::budgeted()): how many blocks the running
// requests' next step takes, preemption of the newest request when that does not fit, resumption
// of preempted requests, what admitting a request costs. Rank 0 runs all of it while planning; the
// cache ops it applies reach the other ranks in the plan. See scheduler.h.
#include <algorithm>
#include <string>

#include "formats/error.h"
#include "lib/engine/scheduler.h"
#include "lib/engine/scheduler_plan.h"

namespace ftx {

void Scheduler::apply_release(int64_t row, Plan& p) {
  engine_.release_rows({static_cast<int32_t>(row)});
  p.ops.push_back({Plan::kRelease, static_cast<int32_t>(row), 0});
  // The blocks it gave back are room, and a prompt of this plan that shared them now takes them
  // from the pool: the room is counted again at its next look (room()).
  room_stale_ = true;
}

int64_t Scheduler::room(const Plan& p) {
  if (!room_stale_) return room_;
  room_ = engine_.kv_cache().available() - step_cost() - planned_steps_;
  std::vector<std::vector<int32_t>> prefills;  // one engine prefill: shared cached blocks are taken once
  for (const auto& run : p.runs) {
    if (run.append) room_ -= engine_.append_cost(run.row, static_cast<int64_t>(run.feed.size()));
    else prefills.push_back(run.feed);
  }
  room_ -= engine_.prefill_blocks(prefills);
  room_stale_ = false;
  return room_;
}

void Scheduler::apply_fork(int64_t dst, int64_t src, Plan& p) {
  engine_.copy_rows({static_cast<int32_t>(dst)}, {static_cast<int32_t>(src)});
  p.ops.push_back({Plan::kFork, static_cast<int32_t>(dst), static_cast<int32_t>(src)});
}

int64_t Scheduler::step_cost() const {
  const int64_t K = beam_;
  std::vector<int32_t> rows;
  int64_t slots = 0;
  for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
    if (!running(s)) continue;
    ++slots;
    rows.push_back(static_cast<int32_t>(s * K));
  }
  // One row each: exactly what their writes take. Beams are reordered after this is asked (a row
  // may come to share its last block): a block per beam bounds it.
  return K == 1 ? engine_.decode_cost(rows) : slots * K;
}

int64_t Scheduler::evict_idle_session(Plan& p, const std::string& keep) {
  Session* victim = nullptr;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].parked || parked_by_[i] == keep) continue;
    Session& cand = sessions_.at(parked_by_[i]);
    if (!victim || cand.last_used < victim->last_used) victim = &cand;
  }
  if (!victim) return -1;
  const int64_t s = victim->slot;
  apply_release(s * p.beam, p);
  victim->slot = -1;
  victim->cached = 0;
  slots_[static_cast<size_t>(s)].parked = false;
  ++stats_.evictions;
  return s;
}

int64_t Scheduler::make_room(Plan& p) {
  const auto& kv = engine_.kv_cache();
  int64_t room = kv.available() - step_cost();
  while (room < 0) {
    if (evict_idle_session(p) < 0) {
      // The newest running request gives its blocks back; the decoder keeps its state. One request
      // alone always fits (its whole length was checked against the pool when it was admitted), so
      // the last one is never preempted.
      int64_t victim = -1, running_now = 0;
      for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
        if (!running(s)) continue;
        ++running_now;
        if (victim < 0 || slots_[s].admitted > slots_[victim].admitted) victim = s;
      }
      if (running_now <= 1) return 0;
      for (int64_t k = 0; k < beam_; ++k) apply_release(victim * beam_ + k, p);
      slots_[static_cast<size_t>(victim)].preempted = true;
      decoder_->set_paused(victim, true);
      p.preempt.push_back(victim);
      ++stats_.preemptions;
    }
    room = kv.available() - step_cost();
  }
  return room;
}

void Scheduler::resume_preempted(Plan& p, bool* waiting) {
  *waiting = false;
  blocked_ = Blocked();
  std::vector<int64_t> order;
  bool others = false;  // a request runs besides those resumed here
  for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
    if (slots_[s].used && slots_[s].preempted) order.push_back(s);
    others |= running(s);
  }
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return slots_[a].admitted < slots_[b].admitted; });
  const int64_t K = beam_, bs = engine_.kv_cache().block_size();
  for (int64_t s : order) {
    // Each unfinished row is prefilled with its tokens so far (the prefix cache usually still holds
    // the prompt's blocks); finished rows are never read again.
    std::vector<Plan::Run> runs;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = s * K + k;
      if (decoder_->row_finished(r)) continue;
      Plan::Run run;
      run.row = static_cast<int32_t>(r);
      run.feed = decoder_->history(r);
      runs.push_back(std::move(run));
    }
    int64_t prompt = 0, step = 0;
    auto cost = [&] {
      prompt = step = 0;
      for (const auto& run : runs) {
        prompt += engine_.prefill_cost(run.feed).blocks;
        step += K > 1 ? 1 : (engine_.slots_for(run.feed) % bs == 0 ? 1 : 0);
      }
      return prompt + step;
    };
    // A preempted request comes before the caches of idle sessions: they give their blocks back
    // until its history and next step fit (otherwise parked sessions could hold the pool while
    // nothing runs, for ever). The cost is taken again after each eviction: a block the evicted row
    // shared with this request's history now costs a block of `available`.
    int64_t want = cost();
    while (want > room(p)) {
      if (evict_idle_session(p) < 0) break;
      want = cost();
    }
    if (!others && prompt <= room(p)) want = prompt;  // alone, with no idle session left: its step fits
    if (want > room(p)) {
      *waiting = true;  // first come, first served: nothing newer starts before it
      blocked_ = {s, want, room(p)};
      break;
    }
    room_ -= prompt + step;
    planned_steps_ += step;
    others = true;
    p.resume.push_back(s);
    for (auto& run : runs) p.runs.push_back(std::move(run));
  }
}

Scheduler::AdmissionCost Scheduler::admission_cost(const Request& r, const std::vector<int32_t>& context,
                                                  int64_t append_row, int64_t append_n, int64_t beam,
                                                  const std::string& who) const {
  const auto& kv = engine_.kv_cache();
  const int64_t bs = kv.block_size();
  const int64_t held = engine_.slots_for(context);
  int64_t slots = held + r.decode.max_new_tokens;
  if (opt_.memory_len > 0) slots = std::min(slots, opt_.memory_len);
  const int64_t worst = beam * ((slots + bs - 1) / bs);
  if (worst > kv.capacity())
    throw Error(who + ": " + std::to_string(slots) + " tokens of KV cache (its context and max_new_tokens" +
                (beam > 1 ? ", for each of " + std::to_string(beam) + " beams" : std::string()) + ") need " +
                std::to_string(worst) + " blocks of " + std::to_string(bs) + " tokens, more than the " +
                std::to_string(kv.capacity()) + " of the budget (raise --kv-cache-memory)");
  AdmissionCost c;
  c.prompt = append_row >= 0 ? engine_.append_cost(static_cast<int32_t>(append_row), append_n)
                             : engine_.prefill_cost(context, !r.output.context_log_probs && !r.output.context_embedding).blocks;
  // Its first decode step: a new block at a block boundary; beams also copy the shared last block.
  if (r.decode.max_new_tokens > 1) c.step = beam > 1 ? beam : (held % bs == 0 ? 1 : 0);
  return c;
}

}  // namespace ftx
