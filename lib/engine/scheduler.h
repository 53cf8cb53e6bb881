#pragma once
// Scheduler: runs a stream of requests through an Engine and a Decoder. Cache rows are the unit of
// scheduling: `batch_size` request slots of beam_width rows each. With continuous batching (the
// default) a request that finishes gives its rows to the next waiting request at once: the
// newcomers are prefilled into the freed rows, then decode steps go on over every live row. With
// static batching a new batch starts only when the whole previous one has finished (FT's
// behaviour). Either way each request keeps its own sampling parameters and random stream, so its
// tokens do not depend on its neighbours.
//
// Sessions (FT's interactive generation): requests that name the same session are its rounds. A
// round's tokens are appended to the session's context (its earlier prompts and generated tokens)
// and only what the cache does not hold yet runs through the model (Engine::append): between
// rounds the session keeps its slot ("parked"), its best beam's row holding the context. A
// session's next round waits for the previous one; rounds of different sessions batch together.
// When slots run out, the least recently used idle session loses its cache (its context stays on
// the host and is run again at its next round), so any number of sessions fit in bounded memory;
// a session ends (and frees everything) with a round marked session_end, or a control request.
//
// The KV cache (lib/engine/kv_cache/): rows hold blocks, not max_seq slots. A finished request's
// rows give their blocks back at once (full blocks stay in the prefix cache for later prompts with
// the same start); beams share their parents' blocks. With a fixed cache budget
// (Engine::budgeted()) a request is admitted when the blocks of its prompt (those the prefix cache
// does not hold) and its first step fit beside the next step of every running request; when a
// step would run out, idle sessions lose their blocks first, then the newest running request is
// preempted: its blocks are released, the decoder keeps its state, and when blocks are free again
// (before any new admission) each of its rows is prefilled with its tokens so far and it goes on,
// with the tokens it would have had. A request that could not finish even alone is an error.
// Newcomers whose first uncached block another newcomer of the same admission computes wait one
// step, so that a prefix shared by a wave of requests is computed once; a session's later rounds
// wait behind such a round (a session's requests always start in input order).
//
// Requests are pulled one by one from a RequestSource into a short look-ahead queue (a session's
// next round must not hold up others) and results are handed out as each request finishes
// (completion order; OrderedResults restores input order), so memory is bounded by the batch, not
// by the input. Beam width is one value per batch (as in FT): a request with another width waits
// until the running ones have finished.
//
// Tensor parallelism: every rank runs the engine; rank 0 alone reads the requests, runs the Decoder
// and keeps the sessions. Each iteration it broadcasts what it admitted (slots, tokens to feed, row
// copies) and then the step's tokens/parents/finished flags, so the ranks never diverge and a bad
// request or a stop reaches every rank as the same error.
// Pipeline parallelism changes nothing here: every rank of every stage executes the same plan, and
// the engine brings the last stage's logits to rank 0 (engine.h), which decodes and broadcasts.
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lib/decoding/decoder.h"
#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"
#include "lib/engine/generation_output.h"
#include "lib/engine/requests.h"
#include "lib/engine/step_logits.h"

namespace ftx {

// More request slots than any batch a GPU or CPU decodes at once; bounds the host tables.
constexpr int64_t kMaxBatchSize = 65536;

struct SchedulerOptions {
  int64_t batch_size = 8;           // request slots decoded together
  int64_t max_seq_len = 0;          // KV cache length per row; 0: grows with the requests
  bool continuous = true;           // refill finished rows at once; false: static batches
  // A session's context plus a round's new tokens may not exceed this (0: no limit but the
  // model's position table).
  int64_t session_len = 0;
  // > 0: circular KV cache of this many tokens (EngineOptions::memory_len must match); a round's
  // new tokens may not exceed it.
  int64_t memory_len = 0;
  int64_t max_positions = 0;  // learned position table rows (0: none): bounds a session's context
  // A request that cannot start (a session beyond --session-len or the position table, a request
  // the KV-cache budget cannot hold, a bad parameter) fails alone: its result carries the error
  // (GenerationOutput::error) and the run goes on, its session as it was. Otherwise (batch jobs)
  // it is the run's Error. ftx chat on a terminal: the user shortens the line or /resets.
  bool refuse_alone = false;
};

struct GenerateStats {
  double first_token_s = -1;   // time to the first token of the run (prefill + first step)
  double total_s = 0;          // wall time of the run
  double prefill_s = 0;
  int64_t requests = 0;
  int64_t prompt_tokens = 0;     // tokens fed to prefills and appends (a preempted request's again when it
                                 // resumes; Engine::tokens_reused() says how many the prefix cache held)
  int64_t generated_tokens = 0;  // new tokens of the best beams (end_id included when produced)
  int64_t prefills = 0;          // admissions (static batching: batches)
  int64_t steps = 0;             // decode steps
  int64_t evictions = 0;         // idle sessions whose cache was dropped for want of a slot or blocks
  int64_t preemptions = 0;       // running requests whose cache was dropped for want of blocks
  int64_t peak_rows = 0;         // most rows a decode step ran
};

class Scheduler {
 public:
  Scheduler(Engine& engine, dist::Communicator& comm, SchedulerOptions options);

  enum class Status { kDone, kStopped };
  // Every rank calls run(); rank 0 passes the source (others nullptr) and receives the callbacks.
  // should_stop (rank 0) is polled before each step: true ends the run after the results already
  // handed out (kStopped on every rank). Throws Error on every rank for a request the engine
  // cannot hold or the decoder rejects.
  Status run(RequestSource* source, const ResultCallback& on_result, const StreamCallback& on_token = nullptr,
             const std::function<bool()>& should_stop = nullptr);
  // All requests at once; outputs in input order (rank 0; other ranks get empty outputs).
  std::vector<GenerationOutput> run_all(const std::vector<DecodeRequest>& requests,
                                        const StreamCallback& on_token = nullptr);
  // Rank 0, during run() (from a callback): every request decoding now ends after the current step,
  // with the tokens it has (finish reason none); a session keeps them as its context. ftx chat's
  // Ctrl-C: the answer stops, the conversation goes on.
  void finish_running() { cut_short_ = true; }
  // --resume (rank 0, before run): a session whose earlier rounds' results are already written
  // continues from `context` (its prompts and generated tokens) after `rounds` rounds.
  void restore_session(const std::string& session, std::vector<int32_t> context, int64_t rounds);
  const GenerateStats& stats() const { return stats_; }

 private:
  struct Plan;
  struct Slot {
    bool used = false;    // a request is decoding in it
    bool parked = false;  // a session keeps its cache here between rounds
    bool preempted = false;  // its request waits for blocks to run again (its rows hold none)
    uint64_t admitted = 0;   // admission order (rank 0): the newest is preempted first
    int64_t index = 0;
    int64_t need = 0;  // cache slots the request may fill (its context, new tokens and output)
    int64_t input_length = 0;
    int64_t steps = 0;  // decoding steps taken (the next streamed token's index)
    uint64_t fingerprint = 0;
    ResultOptions output;
    std::vector<float> context_embedding;
    std::vector<float> context_log_probs;
    std::string session;
    int64_t round = 0, context_length = 0;
    bool session_end = false;
    int32_t soft_id = -1;  // its soft prompt's first id (the engine holds the rows), or -1
  };
  struct Session {
    std::vector<int32_t> context;  // every token of the session so far (prompts and outputs)
    int64_t cached = 0;            // of those, how many the parked slot's row holds
    int64_t slot = -1;             // parked slot, or -1 (not resident: run again from the start)
    bool busy = false;             // a round is decoding
    int64_t rounds = 0;
    uint64_t last_used = 0;
  };

  bool any_decoding() const;
  bool running(int64_t s) const { return slots_[static_cast<size_t>(s)].used && !slots_[static_cast<size_t>(s)].preempted; }
  // Every row gives its blocks back (the end of a run).
  void release_all();

  // ---- admission (scheduler_admission.cc), rank 0
  Plan plan(RequestSource* source, const std::function<bool()>& should_stop);
  // Rank 0: whether `r` can start now (kAdmitted: the plan entry is filled and slots/sessions
  // consumed), must wait for rows or blocks (kWait), or waits one step for a newcomer of this plan
  // that computes its first uncached block (kDefer).
  enum class Admission { kAdmitted, kWait, kDefer };
  Admission try_admit(const Request& r, Plan& p, std::vector<int64_t>& free, int64_t beam);
  int64_t take_free_slot(std::vector<int64_t>& free, Plan& p);

  // ---- sessions (scheduler_sessions.cc), rank 0
  void end_session(const std::string& id, Plan& p);
  void finish_round(int64_t s, int64_t best_beam, const GenerationOutput& out);

  // ---- the plan on every rank (scheduler_plan.cc)
  void share(Plan& p);
  void replay_ops(const Plan& p);  // ranks other than 0: the cache ops rank 0 applied while planning

  // ---- the plan's requests start (scheduler_prefill.cc), every rank
  void admit(const Plan& p);
  int64_t cache_length_for(int64_t need) const;

  // ---- the KV-cache budget (scheduler_memory.cc), rank 0 while planning
  // Applies a cache op to the engine now and records it for the other ranks.
  void apply_release(int64_t row, Plan& p);
  void apply_fork(int64_t dst, int64_t src, Plan& p);
  // Blocks the next step of the running requests may take.
  int64_t step_cost() const;
  // Blocks free for admissions once every running request's next step is provided for; preempts
  // (and evicts idle sessions) until that is not negative.
  int64_t make_room(Plan& p);
  // The least recently used idle session (other than `keep`) drops its blocks and leaves its slot;
  // returns the slot, or -1 when no session is idle.
  int64_t evict_idle_session(Plan& p, const std::string& keep = "");
  // Preempted requests that fit in the room run again (oldest first), idle sessions giving their
  // blocks back for them; whether one still waits (blocked_ says which).
  void resume_preempted(Plan& p, bool* waiting);
  // Blocks still free for this plan's admissions: room_, counted again from the pool after a cache
  // op released blocks (the pool, less the running requests' next step, this plan's runs and their
  // first steps), since a prompt of the plan may have shared what was released.
  int64_t room(const Plan& p);
  // The end of planning (scheduler_progress.cc): a plan that starts, resumes and consumes nothing
  // while nothing runs would be planned again and again for ever; Error naming the request that
  // waits instead. `consumed`: requests the plan took from the look-ahead without admitting them.
  void check_progress(const Plan& p, size_t consumed) const;
  // The blocks admitting `r` takes: its prompt's (a fresh prefill of `context`, or appending the
  // last append_n tokens to append_row when append_row >= 0) and its first step's. Error when it
  // could not finish even alone in the pool.
  struct AdmissionCost {
    int64_t prompt = 0, step = 0;
  };
  AdmissionCost admission_cost(const Request& r, const std::vector<int32_t>& context, int64_t append_row,
                               int64_t append_n, int64_t beam, const std::string& who) const;

  Engine& engine_;
  dist::Communicator& comm_;
  SchedulerOptions opt_;
  GenerateStats stats_;
  int64_t beam_ = 0;  // beam width of the running batch (0: none yet)
  std::vector<Slot> slots_;
  std::unique_ptr<Decoder> decoder_;  // rank 0
  StepLogits logits_;                 // rank 0: [slots · beam], each row's latest logits
  // Rank 0 only:
  std::deque<Request> pending_;       // look-ahead: pulled from the source, not yet admitted
  std::unordered_map<std::string, Session> sessions_;
  std::vector<std::string> parked_by_;  // per slot: the session parked there (when Slot::parked)
  // Cache ops (Plan::CacheOp) for the next plan: rows of finished requests, a session's best beam.
  std::vector<std::array<int32_t, 3>> pending_ops_;
  uint64_t clock_ = 0;
  uint64_t admissions_ = 0;
  int64_t room_ = 0;  // while planning: blocks still free for admissions (read through room())
  bool room_stale_ = false;  // a release since room_ was counted
  int64_t planned_steps_ = 0;  // while planning: first-step blocks reserved for this plan's runs
  struct Blocked {     // while planning: the preempted request that could not run again
    int64_t slot = -1, want = 0, room = 0;  // its slot, the blocks it needs, those it found
  } blocked_;
  std::unordered_set<uint64_t> produced_;  // while planning: prefix blocks this plan's newcomers compute
  bool cut_short_ = false;  // rank 0: finish_running() was called
};

}  // namespace ftx
