// Admission, prefill into free rows, the step loop, streaming and results. See scheduler.h.
#include "lib/engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "formats/error.h"

namespace ftx {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The KV cache grows in steps of this many slots, so a stream of prompts of slowly rising length
// does not copy the cache at every admission.
constexpr int64_t kCacheGrain = 64;

}  // namespace

// What rank 0 decided for one iteration; every rank receives it (share()).
struct Scheduler::Plan {
  enum Flag : int64_t { kEnd = 1, kStop = 2, kError = 4 };
  int64_t flags = 0;
  int64_t beam = 0;  // beam width of the batch after this admission
  std::vector<int64_t> slot, need;
  std::vector<std::vector<int32_t>> prompts;
  std::string error;
  std::vector<Request> requests;  // rank 0 only
};

Scheduler::Scheduler(Engine& engine, dist::Communicator& comm, SchedulerOptions options)
    : engine_(engine), comm_(comm), opt_(options) {
  if (opt_.batch_size < 1 || opt_.batch_size > kMaxBatchSize)
    throw Error("batch size " + std::to_string(opt_.batch_size) + " outside [1, " + std::to_string(kMaxBatchSize) + "]");
  if (opt_.max_seq_len < 0) throw Error("max_seq_len " + std::to_string(opt_.max_seq_len) + " is negative");
  slots_.resize(static_cast<size_t>(opt_.batch_size));
}

Scheduler::Plan Scheduler::plan(RequestSource* source, const std::function<bool()>& should_stop) {
  Plan p;
  p.beam = beam_;
  if (should_stop && should_stop()) {
    p.flags |= Plan::kStop;
    return p;
  }
  try {
    const bool any_used = std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.used; });
    if (opt_.continuous || !any_used) {
      std::vector<int64_t> free;
      for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s)
        if (!slots_[s].used) free.push_back(s);
      size_t next_free = 0;
      while (next_free < free.size()) {
        const Request* r = source->peek();
        if (!r) break;
        const int64_t k = r->decode.sampling.beam_width;
        if (k != p.beam) {
          // Beam width is one value per batch: a request with another one waits for the running
          // requests to finish, then starts a batch of its own width.
          if (any_used || !p.slot.empty()) break;
          p.beam = k;
        }
        try {
          check_decode_request(r->decode, engine_.vocab_size());
        } catch (const Error& e) {
          throw Error("request " + std::to_string(r->index + 1) + ": " + e.what());
        }
        const int64_t need = static_cast<int64_t>(r->decode.input_ids.size()) + r->decode.max_new_tokens;
        if (opt_.max_seq_len > 0 && need > opt_.max_seq_len)
          throw Error("request " + std::to_string(r->index + 1) + ": " + std::to_string(r->decode.input_ids.size()) +
                      " prompt tokens + " + std::to_string(r->decode.max_new_tokens) +
                      " new tokens exceed --max-seq-len " + std::to_string(opt_.max_seq_len));
        Request req = source->take();
        p.slot.push_back(free[next_free++]);
        p.need.push_back(need);
        p.prompts.push_back(req.decode.input_ids);
        p.requests.push_back(std::move(req));
      }
      if (p.slot.empty() && !any_used && source->peek() == nullptr) p.flags |= Plan::kEnd;
    }
  } catch (const Error& e) {
    p.flags |= Plan::kError;
    p.error = e.what();
  }
  return p;
}

void Scheduler::share(Plan& p) {
  if (comm_.size() == 1) return;
  int64_t ids = 0;
  for (const auto& q : p.prompts) ids += static_cast<int64_t>(q.size());
  int64_t head[5] = {p.flags, p.beam, static_cast<int64_t>(p.slot.size()), ids, static_cast<int64_t>(p.error.size())};
  comm_.broadcast(head, sizeof head, 0);
  p.flags = head[0];
  p.beam = head[1];
  const int64_t n = head[2];
  if (n > 0) {
    // [slot, need, length] per newcomer, then every prompt's ids.
    std::vector<int64_t> body;
    if (comm_.rank() == 0) {
      for (size_t i = 0; i < p.slot.size(); ++i) {
        body.push_back(p.slot[i]);
        body.push_back(p.need[i]);
        body.push_back(static_cast<int64_t>(p.prompts[i].size()));
      }
      for (const auto& q : p.prompts) body.insert(body.end(), q.begin(), q.end());
    }
    body.resize(static_cast<size_t>(3 * n + head[3]));
    comm_.broadcast(body.data(), body.size() * sizeof(int64_t), 0);
    if (comm_.rank() != 0) {
      p.slot.clear();
      p.need.clear();
      p.prompts.clear();
      size_t at = static_cast<size_t>(3 * n);
      for (int64_t i = 0; i < n; ++i) {
        p.slot.push_back(body[3 * i]);
        p.need.push_back(body[3 * i + 1]);
        const int64_t len = body[3 * i + 2];
        p.prompts.emplace_back(body.begin() + at, body.begin() + at + len);
        at += static_cast<size_t>(len);
      }
    }
  }
  if (head[4] > 0) {
    p.error.resize(static_cast<size_t>(head[4]));
    comm_.broadcast(&p.error[0], p.error.size(), 0);
  }
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
  const int64_t n = static_cast<int64_t>(p.slot.size());
  if (n == 0) return;
  const int64_t K = p.beam;
  int64_t need = 0, longest = 0;
  if (K == beam_)
    for (const Slot& s : slots_)
      if (s.used) need = std::max(need, s.need);
  for (int64_t i = 0; i < n; ++i) {
    need = std::max(need, p.need[i]);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.prompts[i].size()));
  }
  // Every rank checks its own memory before allocating; all stop together when one cannot.
  std::string failed;
  try {
    engine_.reserve(B * K, cache_length_for(need), n * longest);
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
      logits_.assign(static_cast<size_t>(B * beam_ * V), 0.0f);
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> first_rows;
  for (int64_t i = 0; i < n; ++i) first_rows.push_back(static_cast<int32_t>(p.slot[i] * K));
  std::vector<float> prompt_logits(leader ? static_cast<size_t>(n * V) : 0);
  std::vector<float> ctx;
  engine_.prefill(p.prompts, first_rows, leader ? prompt_logits.data() : nullptr,
                  opt_.context_embeddings ? &ctx : nullptr);
  if (K > 1) {
    // Every beam starts from its request's prompt.
    std::vector<int32_t> dst, src;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 1; k < K; ++k) {
        dst.push_back(static_cast<int32_t>(p.slot[i] * K + k));
        src.push_back(first_rows[i]);
      }
    engine_.copy_rows(dst, src);
  }
  const int64_t H = opt_.context_embeddings && n > 0 ? static_cast<int64_t>(ctx.size()) / n : 0;
  for (int64_t i = 0; i < n; ++i) {
    Slot& s = slots_[static_cast<size_t>(p.slot[i])];
    s = Slot();
    s.used = true;
    s.need = p.need[i];
    s.input_length = static_cast<int64_t>(p.prompts[i].size());
    if (H > 0) s.context_embedding.assign(ctx.begin() + i * H, ctx.begin() + (i + 1) * H);
    stats_.prompt_tokens += s.input_length;
    if (!leader) continue;
    const Request& req = p.requests[static_cast<size_t>(i)];
    s.index = req.index;
    s.fingerprint = req.fingerprint;
    s.output = req.output;
    decoder_->add(p.slot[i], req.decode);
    for (int64_t k = 0; k < K; ++k)
      std::copy_n(prompt_logits.begin() + i * V, V, logits_.begin() + (p.slot[i] * K + k) * V);
  }
  stats_.requests += n;
  ++stats_.prefills;
  stats_.prefill_s += seconds_since(t0);
}

Scheduler::Status Scheduler::run(RequestSource* source, const ResultCallback& on_result,
                                 const StreamCallback& on_token, const std::function<bool()>& should_stop) {
  const bool leader = comm_.rank() == 0;
  if (leader && !source) throw Error("scheduler: rank 0 needs a request source");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t V = engine_.vocab_size();
  std::vector<int32_t> msg, step_logits_rows, feed;
  std::vector<float> step_logits;
  std::vector<uint8_t> was_finished;
  Status status = Status::kDone;

  for (;;) {
    Plan p;
    if (leader) p = plan(source, should_stop);
    share(p);
    if (p.flags & Plan::kError) throw Error(p.error);
    if (p.flags & Plan::kStop) {
      status = Status::kStopped;
      break;
    }
    if (p.flags & Plan::kEnd) break;
    const int64_t old_beam = beam_;
    admit(p);
    const int64_t K = beam_;
    const int64_t rows = static_cast<int64_t>(slots_.size()) * K;
    if (old_beam != K || static_cast<int64_t>(was_finished.size()) != rows) was_finished.assign(static_cast<size_t>(rows), 1);
    for (int64_t s : p.slot)
      for (int64_t k = 0; k < K; ++k) was_finished[static_cast<size_t>(s * K + k)] = 0;
    if (std::none_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.used; })) continue;

    // One decoding step for every live request: rank 0 decides, every rank receives
    // [tokens | parents | finished] for all rows.
    msg.assign(static_cast<size_t>(3 * rows), 0);
    if (leader) {
      const StepOutput& so = decoder_->step(logits_.data());
      for (int64_t r = 0; r < rows; ++r) {
        msg[r] = so.tokens[r];
        msg[rows + r] = so.parents[r];
        msg[2 * rows + r] = so.finished[r] ? 1 : 0;
      }
    }
    comm_.broadcast(msg.data(), msg.size() * sizeof(int32_t), 0);
    if (stats_.first_token_s < 0) stats_.first_token_s = seconds_since(t0);
    const int32_t* tokens = msg.data();
    const int32_t* parents = msg.data() + rows;
    const int32_t* finished = msg.data() + 2 * rows;

    for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
      Slot& slot = slots_[static_cast<size_t>(s)];
      if (!slot.used) continue;
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
      if (!done) continue;
      if (leader) {
        GenerationOutput out;
        out.index = slot.index;
        out.fingerprint = slot.fingerprint;
        out.output = slot.output;
        out.input_length = slot.input_length;
        out.context_embedding = std::move(slot.context_embedding);
        out.result = decoder_->take(s);
        if (!out.result.beams.empty()) stats_.generated_tokens += static_cast<int64_t>(out.result.beams[0].output_ids.size());
        on_result(std::move(out));
      }
      slot = Slot();
    }
    for (int64_t r = 0; r < rows; ++r) was_finished[r] = finished[r] != 0;
    ++stats_.steps;

    // Reorder the beams' caches, then run every unfinished row of a live request one step.
    std::vector<int32_t> dst, src;
    feed.clear();
    step_logits_rows.clear();
    for (int64_t s = 0; s < static_cast<int64_t>(slots_.size()); ++s) {
      if (!slots_[static_cast<size_t>(s)].used) continue;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t r = s * K + k;
        if (K > 1 && parents[r] != r) {
          dst.push_back(static_cast<int32_t>(r));
          src.push_back(parents[r]);
        }
        if (!finished[r]) {
          step_logits_rows.push_back(static_cast<int32_t>(r));
          feed.push_back(tokens[r]);
        }
      }
    }
    if (!dst.empty()) engine_.copy_rows(dst, src);
    const int64_t na = static_cast<int64_t>(feed.size());
    if (na == 0) continue;
    if (leader) step_logits.resize(static_cast<size_t>(na * V));
    engine_.decode(feed, step_logits_rows, leader ? step_logits.data() : nullptr);
    if (leader)
      for (int64_t i = 0; i < na; ++i)
        std::copy_n(step_logits.begin() + i * V, V, logits_.begin() + static_cast<int64_t>(step_logits_rows[i]) * V);
  }
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
