// Admission (requests and session rounds into free or parked rows), the step loop, streaming and
// results. See scheduler.h.
#include "lib/engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <unordered_set>

#include "formats/error.h"
#include "lib/engine/scheduler_plan.h"
#include "lib/ops/backend.h"

namespace ftx {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The KV cache grows in steps of this many slots, so a stream of prompts of slowly rising length
// does not copy the cache at every admission.
constexpr int64_t kCacheGrain = 64;

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
  context.insert(context.end(), ids.begin(), ids.end());
  const int64_t need = static_cast<int64_t>(context.size()) + r.decode.max_new_tokens;
  if (opt_.max_seq_len > 0 && opt_.memory_len == 0 && need > opt_.max_seq_len)
    throw Error(who + ": " + std::to_string(context.size()) + " context tokens + " +
                std::to_string(r.decode.max_new_tokens) + " new tokens exceed --max-seq-len " +
                std::to_string(opt_.max_seq_len));

  // Blocks: a prompt whose first uncached block a newcomer of this plan computes waits a step, to
  // find it cached; with a budget, the prompt and its first step must fit what is free.
  std::vector<uint64_t> new_keys;
  if (cached == 0 && engine_.kv_cache().sharing() && !opt_.context_embeddings && opt_.continuous) {
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
  meta.input_length = static_cast<int64_t>(ids.size());
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
  run.feed.assign(context.begin() + cached, context.end());
  dec.decode.input_ids = std::move(context);
  p.slot.push_back(slot);
  p.need.push_back(need);
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
      for (size_t i = 0; i < pending_.size();) {
        const Request& r = pending_[i];
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

int64_t Scheduler::cache_length_for(int64_t need) const {
  if (opt_.max_seq_len > 0) return opt_.max_seq_len;
  const int64_t have = engine_.max_seq();
  if (need <= have) return have;
  return (need + kCacheGrain - 1) / kCacheGrain * kCacheGrain;
}

void Scheduler::admit(const Plan& p) {
  const bool leader = comm_.rank() == 0;
  const int64_t V = engine_.vocab_size();
  const int64_t B = static_cast<int64_t>(slots_.size());
  for (int64_t s : p.preempt) slots_[static_cast<size_t>(s)].preempted = true;
  const int64_t n = static_cast<int64_t>(p.slot.size()), nruns = static_cast<int64_t>(p.runs.size());
  if (nruns == 0) return;
  const int64_t K = p.beam;
  int64_t need = 0, longest = 0;
  if (K == beam_)
    for (const Slot& s : slots_)
      if (s.used) need = std::max(need, s.need);
  for (int64_t i = 0; i < n; ++i) need = std::max(need, p.need[i]);
  for (const auto& r : p.runs) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.feed.size()));
    if (!p.resume.empty()) need = std::max<int64_t>(need, static_cast<int64_t>(r.feed.size()));
  }
  // Every rank checks its own memory before allocating; all stop together when one cannot.
  std::string failed;
  try {
    engine_.reserve(B * K, cache_length_for(need), nruns * longest);
    if (leader && K != beam_) {
      // Rank 0's host side: each row's latest logits, the step's logits, the decoder's rows.
      const double host = static_cast<double>(B * K) * (2.0 * static_cast<double>(V) * sizeof(float) + 256.0);
      const size_t avail = ops::host_available_memory();
      if (host > static_cast<double>(avail))
        throw Error("out of memory before allocating: the logits of " + std::to_string(B * K) +
                    " rows (batch x beam) x " + std::to_string(V) + " tokens need " +
                    std::to_string(static_cast<int64_t>(host / (1 << 20))) + " MiB of host memory, " +
                    std::to_string(avail >> 20) + " MiB is available (lower --batch-size or --beam-width)");
    }
  } catch (const Error& e) {
    failed = e.what();
  }
  if (!comm_.all_true(failed.empty()))
    throw Error(failed.empty() ? "another rank could not allocate its KV cache (see its error)" : failed);
  if (K != beam_) {
    // A new batch width (no request is running): every slot takes K rows.
    beam_ = K;
    if (leader) {
      decoder_ = std::make_unique<Decoder>(B, beam_, V);
      logits_.resize(B * beam_);
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  // Fresh rows are prefilled, rows that hold a session's context are appended to; run i's logits
  // land in row i of `run_logits`.
  std::vector<float> run_logits(leader ? static_cast<size_t>(nruns * V) : 0);
  std::vector<float> ctx(opt_.context_embeddings ? static_cast<size_t>(nruns * engine_.hidden()) : 0);
  std::vector<int64_t> run_of_row(static_cast<size_t>(B * K), -1);
  for (int64_t i = 0; i < nruns; ++i) run_of_row[static_cast<size_t>(p.runs[i].row)] = i;
  const int64_t H = engine_.hidden();
  for (const uint8_t kind : {uint8_t{0}, uint8_t{1}}) {
    std::vector<std::vector<int32_t>> feeds;
    std::vector<int32_t> rows;
    std::vector<int64_t> which;
    for (int64_t i = 0; i < nruns; ++i)
      if (p.runs[i].append == kind) {
        feeds.push_back(p.runs[i].feed);
        rows.push_back(p.runs[i].row);
        which.push_back(i);
      }
    if (feeds.empty()) continue;
    std::vector<float> lg(leader ? static_cast<size_t>(feeds.size() * V) : 0), c;
    if (kind == 0)
      engine_.prefill(feeds, rows, leader ? lg.data() : nullptr, opt_.context_embeddings ? &c : nullptr);
    else
      engine_.append(feeds, rows, leader ? lg.data() : nullptr, opt_.context_embeddings ? &c : nullptr);
    for (size_t j = 0; j < which.size(); ++j) {
      if (leader) std::copy_n(lg.begin() + static_cast<int64_t>(j) * V, V, run_logits.begin() + which[j] * V);
      if (!c.empty()) std::copy_n(c.begin() + static_cast<int64_t>(j) * H, H, ctx.begin() + which[j] * H);
    }
  }
  for (const auto& r : p.runs) stats_.prompt_tokens += static_cast<int64_t>(r.feed.size());
  if (K > 1 && n > 0) {
    // Every beam starts from its request's context: its blocks, shared.
    std::vector<int32_t> dst, src;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 1; k < K; ++k) {
        dst.push_back(static_cast<int32_t>(p.slot[i] * K + k));
        src.push_back(static_cast<int32_t>(p.slot[i] * K));
      }
    engine_.copy_rows(dst, src);
  }
  for (int64_t i = 0; i < n; ++i) {
    Slot& s = slots_[static_cast<size_t>(p.slot[i])];
    s = leader ? p.meta[static_cast<size_t>(i)] : Slot();
    s.used = true;
    s.parked = false;
    s.need = p.need[i];
    const int64_t run = run_of_row[static_cast<size_t>(p.slot[i] * K)];
    if (!ctx.empty()) s.context_embedding.assign(ctx.begin() + run * H, ctx.begin() + (run + 1) * H);
    if (!leader) continue;
    decoder_->add(p.slot[i], p.requests[static_cast<size_t>(i)].decode);
    for (int64_t k = 0; k < K; ++k)
      logits_.set_row(p.slot[i] * K + k, run_logits.data() + run * V);
  }
  for (int64_t s : p.resume) {
    // A preempted request goes on: each of its unfinished rows holds its history again, and its
    // logits are those after it, as the step it missed would have left them.
    slots_[static_cast<size_t>(s)].preempted = false;
    if (!leader) continue;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t run = run_of_row[static_cast<size_t>(s * K + k)];
      if (run >= 0) logits_.set_row(s * K + k, run_logits.data() + run * V);
    }
    decoder_->set_paused(s, false);
  }
  stats_.requests += n;
  ++stats_.prefills;
  stats_.prefill_s += seconds_since(t0);
}

void Scheduler::release_all() {
  std::vector<int32_t> rows;
  for (int64_t r = 0; r < engine_.rows(); ++r) rows.push_back(static_cast<int32_t>(r));
  engine_.release_rows(rows);
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

void OrderedResults::add(GenerationOutput&& out) {
  const int64_t index = out.index;
  pending_.emplace(index, std::move(out));
  while (!pending_.empty() && pending_.begin()->first == next_) {
    sink_(std::move(pending_.begin()->second));
    pending_.erase(pending_.begin());
    ++next_;
  }
}

}  // namespace ftx
