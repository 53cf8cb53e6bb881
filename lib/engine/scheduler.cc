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
