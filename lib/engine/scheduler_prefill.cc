// A plan's requests start, on every rank (admit): the engine makes room for them, their tokens run
// (a prefill into fresh rows, an append to a resident session's row, a preempted request's history
// again), beams fork from their request's first row, and rank 0's decoder takes each request with
// the logits after its tokens. See scheduler.h.
#include "lib/engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/engine/prefill_groups.h"
#include "lib/engine/scheduler_plan.h"
#include "lib/ops/backend.h"
#include "lib/ops/host_math.h"

namespace ftx {

namespace {

// The KV cache grows in steps of this many slots, so a stream of prompts of slowly rising length
// does not copy the cache at every admission.
constexpr int64_t kCacheGrain = 64;

}  // namespace

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
  int64_t need = 0;
  if (K == beam_)
    for (const Slot& s : slots_)
      if (s.used) need = std::max(need, s.need);
  for (int64_t i = 0; i < n; ++i) need = std::max(need, p.need[i]);
  for (const auto& r : p.runs)
    if (!p.resume.empty()) need = std::max<int64_t>(need, static_cast<int64_t>(r.feed.size()));
  // The engine calls: prefills and appends apart, the runs whose context embedding is wanted apart
  // from the others (the engine takes no prefix-cache blocks for a batch that sums embeddings), and
  // each of those cut by length (prefill_groups.h) so that short prompts are not padded to long ones.
  struct Call {
    uint8_t append = 0, embed = 0;
    std::vector<int64_t> runs;  // indices into p.runs
  };
  std::vector<Call> calls;
  int64_t largest = 0;
  for (const uint8_t group : {uint8_t{0}, uint8_t{1}, uint8_t{2}, uint8_t{3}}) {
    const uint8_t kind = group >> 1, embed = group & 1;  // prefills first
    std::vector<int64_t> which, lengths;
    for (int64_t i = 0; i < nruns; ++i)
      if (p.runs[i].append == kind && p.runs[i].embed == embed) {
        which.push_back(i);
        lengths.push_back(static_cast<int64_t>(p.runs[i].feed.size()));
      }
    const auto groups = prefill_groups(lengths);
    largest = std::max(largest, largest_group_tokens(lengths, groups));
    for (const auto& g : groups) {
      Call c{kind, embed, {}};
      for (int64_t j : g) c.runs.push_back(which[j]);
      calls.push_back(std::move(c));
    }
  }
  // Every rank checks its own memory before allocating; all stop together when one cannot.
  std::string failed;
  try {
    engine_.reserve(B * K, cache_length_for(need), largest);
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

  // The newcomers' soft-prompt rows, on every rank, before the prefills that embed them.
  for (const SoftPrompt& sp : p.soft)
    if (sp.rows > 0) engine_.add_soft_prompt(sp.first_id, sp.rows, sp.values.data());

  const auto t0 = std::chrono::steady_clock::now();
  // Fresh rows are prefilled, rows that hold a session's context are appended to; run i's logits
  // land in row i of `run_logits`.
  std::vector<float> run_logits(leader ? static_cast<size_t>(nruns * V) : 0);
  const bool embedding = std::any_of(p.runs.begin(), p.runs.end(), [](const Plan::Run& r) { return r.embed != 0; });
  std::vector<float> ctx(embedding ? static_cast<size_t>(nruns * engine_.hidden()) : 0);
  std::vector<std::vector<float>> run_scores(static_cast<size_t>(nruns));  // rank 0: scored runs' log probs
  std::vector<int64_t> run_of_row(static_cast<size_t>(B * K), -1);
  for (int64_t i = 0; i < nruns; ++i) run_of_row[static_cast<size_t>(p.runs[i].row)] = i;
  const int64_t H = engine_.hidden();
  for (const Call& call : calls) {
    std::vector<std::vector<int32_t>> feeds;
    std::vector<int32_t> rows;
    const std::vector<int64_t>& which = call.runs;
    ContextScores scores;
    bool scoring = false;
    for (int64_t i : which) {
      feeds.push_back(p.runs[i].feed);
      rows.push_back(p.runs[i].row);
      scores.want.push_back(p.runs[i].score);
      scoring |= p.runs[i].score != 0;
    }
    const uint8_t kind = call.append, embed = call.embed;
    std::vector<float> lg(leader ? static_cast<size_t>(feeds.size() * V) : 0), c;
    if (kind == 0)
      engine_.prefill(feeds, rows, leader ? lg.data() : nullptr, embed ? &c : nullptr, scoring ? &scores : nullptr);
    else
      engine_.append(feeds, rows, leader ? lg.data() : nullptr, embed ? &c : nullptr, scoring ? &scores : nullptr);
    for (size_t j = 0; j < which.size(); ++j) {
      if (leader && scoring) run_scores[which[j]] = std::move(scores.log_probs[j]);
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
    s.soft_id = p.soft[static_cast<size_t>(i)].rows > 0 ? p.soft[static_cast<size_t>(i)].first_id : -1;
    const int64_t run = run_of_row[static_cast<size_t>(p.slot[i] * K)];
    if (p.runs[run].embed) s.context_embedding.assign(ctx.begin() + run * H, ctx.begin() + (run + 1) * H);
    if (!leader) continue;
    s.context_log_probs = std::move(run_scores[run]);
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
  stats_.prefill_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ftx
