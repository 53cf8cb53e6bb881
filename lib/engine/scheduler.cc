// The scheduler's run loop: each iteration rank 0 plans (scheduler_admission.cc), every rank takes
// the plan (scheduler_plan.cc) and starts its requests (scheduler_prefill.cc), then one decoding
// step runs over every live row: rank 0 decides the tokens, streams them and hands out the results
// of the requests that finished. See scheduler.h.
#include "lib/engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "lib/engine/scheduler_plan.h"

namespace ftx {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Scheduler::Scheduler(Engine& engine, dist::Communicator& comm, SchedulerOptions options)
    : engine_(engine), comm_(comm), opt_(options), logits_(engine) {
  if (opt_.batch_size < 1 || opt_.batch_size > kMaxBatchSize)
    throw Error("batch size " + std::to_string(opt_.batch_size) + " outside [1, " + std::to_string(kMaxBatchSize) + "]");
  if (opt_.max_seq_len < 0) throw Error("max_seq_len " + std::to_string(opt_.max_seq_len) + " is negative");
  if (opt_.memory_len != engine_.memory_len())
    throw Error("scheduler memory_len " + std::to_string(opt_.memory_len) + " differs from the engine's " +
                std::to_string(engine_.memory_len()));
  slots_.resize(static_cast<size_t>(opt_.batch_size));
  parked_by_.resize(slots_.size());
}

bool Scheduler::any_decoding() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.used; });
}

void Scheduler::release_all() {
  std::vector<int32_t> rows;
  for (int64_t r = 0; r < engine_.rows(); ++r) rows.push_back(static_cast<int32_t>(r));
  engine_.release_rows(rows);
  engine_.drop_soft_prompts();
  pending_ops_.clear();
  for (auto& kv : sessions_) {
    kv.second.slot = -1;
    kv.second.cached = 0;
  }
  for (Slot& s : slots_) s.parked = false;
}

Scheduler::Status Scheduler::run(RequestSource* source, const ResultCallback& on_result,
                                 const StreamCallback& on_token, const std::function<bool()>& should_stop) {
  const bool leader = comm_.rank() == 0;
  if (leader && !source) throw Error("scheduler: rank 0 needs a request source");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t V = engine_.vocab_size();
  std::vector<int32_t> msg, step_logits_rows, feed;
  std::vector<uint8_t> was_finished;
  Status status = Status::kDone;

  for (;;) {
    Plan p;
    if (leader) p = plan(source, should_stop);
    share(p);
    replay_ops(p);
    if (p.flags & Plan::kError) throw Error(p.error);
    if (p.flags & Plan::kStop) {
      status = Status::kStopped;
      break;
    }
    for (auto& out : p.refused) on_result(std::move(out));  // rank 0 only: the others have none
    if (p.flags & Plan::kEnd) break;
    const int64_t old_beam = beam_;
    admit(p);
    const int64_t K = beam_;
    const int64_t rows = static_cast<int64_t>(slots_.size()) * K;
    if (old_beam != K || static_cast<int64_t>(was_finished.size()) != rows) was_finished.assign(static_cast<size_t>(rows), 1);
    for (int64_t s : p.slot)
      for (int64_t k = 0; k < K; ++k) was_finished[static_cast<size_t>(s * K + k)] = 0;
    if (!any_decoding()) continue;

    // One decoding step for every live request: rank 0 decides, every rank receives
    // [tokens | parents | finished] for all rows. Preempted requests sit it out.
    msg.assign(static_cast<size_t>(3 * rows), 0);
    if (leader) {
      const StepOutput& so = logits_.step(*decoder_);
      for (int64_t r = 0; r < rows; ++r) {
        msg[r] = so.tokens[r];
        msg[rows + r] = so.parents[r];
        msg[2 * rows + r] = so.finished[r] || cut_short_ ? 1 : 0;  // finish_running(): every row ends here
      }
      cut_short_ = false;
    }
    comm_.broadcast(msg.data(), msg.size() * sizeof(int32_t), 0);
    if (stats_.first_token_s < 0) stats_.first_token_s = seconds_since(t0);
    const int32_t* tokens = msg.data();
    const int32_t* parents = msg.data() + rows;
    const int32_t* finished = msg.data() + 2 * rows;

    // Beams are reordered before anything reads their rows (a finished round's best beam row):
    // rows take their parents' blocks, shared.
    std::vector<int32_t> dst, src;
    for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
      if (!running(s) || K == 1) continue;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t r = s * K + k;
        if (parents[r] != r) {
          dst.push_back(static_cast<int32_t>(r));
          src.push_back(parents[r]);
        }
      }
    }
    if (!dst.empty()) engine_.copy_rows(dst, src);

    for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
      if (!running(s)) continue;
      Slot& slot = slots_[static_cast<size_t>(s)];
      bool live = false, done = true;
      for (int64_t k = 0; k < K; ++k) {
        live |= !was_finished[s * K + k];
        done &= finished[s * K + k] != 0;
      }
      if (leader && on_token && live) {
        StreamEvent ev;
        ev.index = slot.index;
        ev.step = slot.steps;
        if (K == 1) {
          ev.token = tokens[s];
        } else {
          ev.best = decoder_->current_best(s);
          ev.token = ev.best.empty() ? tokens[s * K] : ev.best.back();
        }
        on_token(ev);
      }
      if (live) ++slot.steps;
      for (int64_t k = 0; k < K; ++k) was_finished[s * K + k] = finished[s * K + k] != 0;
      if (!done) continue;
      if (leader) {
        GenerationOutput out;
        out.index = slot.index;
        out.fingerprint = slot.fingerprint;
        out.output = slot.output;
        out.input_length = slot.input_length;
        out.context_embedding = std::move(slot.context_embedding);
        out.context_log_probs = std::move(slot.context_log_probs);
        out.session = slot.session;
        out.round = slot.round;
        out.context_length = slot.context_length;
        const int64_t best_beam = decoder_->best_beam(s);
        out.result = decoder_->take(s);
        if (!out.result.beams.empty()) stats_.generated_tokens += static_cast<int64_t>(out.result.beams[0].output_ids.size());
        if (!slot.session.empty()) finish_round(s, best_beam, out);
        // The request's rows give their blocks back at the next plan (a session keeps its best).
        if (!slot.parked)
          for (int64_t k = 0; k < K; ++k) pending_ops_.push_back({Plan::kRelease, static_cast<int32_t>(s * K + k), 0});
        on_result(std::move(out));
      }
      if (slot.soft_id >= 0) engine_.drop_soft_prompt(slot.soft_id);
      const bool parked = slot.parked;  // a session keeps its cache in the slot until its next round
      slot = Slot();
      slot.parked = parked;
    }
    if (!any_decoding()) cut_short_ = false;  // a finish_running() that came as the last ones ended
    ++stats_.steps;

    // Run every unfinished row of a live request one step.
    feed.clear();
    step_logits_rows.clear();
    for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
      if (!running(s)) continue;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t r = s * K + k;
        if (!finished[r]) {
          step_logits_rows.push_back(static_cast<int32_t>(r));
          feed.push_back(tokens[r]);
        }
      }
    }
    const int64_t na = static_cast<int64_t>(feed.size());
    if (na == 0) continue;
    stats_.peak_rows = std::max(stats_.peak_rows, na);
    engine_.decode(feed, step_logits_rows, leader ? logits_.decode_target(na) : nullptr);
    if (leader) logits_.take_decode(step_logits_rows);
  }
  // The rows' blocks go back (full ones stay in the prefix cache); sessions keep their contexts.
  release_all();
  stats_.total_s += seconds_since(t0);
  return status;
}

std::vector<GenerationOutput> Scheduler::run_all(const std::vector<DecodeRequest>& requests,
                                                 const StreamCallback& on_token) {
  std::vector<GenerationOutput> out(requests.size());
  std::vector<Request> reqs;
  for (size_t i = 0; i < requests.size(); ++i) {
    Request r;
    r.index = static_cast<int64_t>(i);
    r.decode = requests[i];
    reqs.push_back(std::move(r));
  }
  VectorSource source(std::move(reqs));
  run(comm_.rank() == 0 ? &source : nullptr,
      [&](GenerationOutput&& o) { out[static_cast<size_t>(o.index)] = std::move(o); }, on_token);
  return out;
}

}  // namespace ftx
