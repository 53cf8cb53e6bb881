#pragma once
// What rank 0 decides for one iteration of the scheduler, which every rank receives
// (Scheduler::share, scheduler_plan.cc); private to the scheduler's .cc files.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/engine/scheduler.h"

namespace ftx {

// "request 3" or "request 3 (session \"s1\")": how errors name a request (index 0-based).
std::string request_name(int64_t index, const std::string& session);

struct Scheduler::Plan {
  enum Flag : int64_t { kEnd = 1, kStop = 2, kError = 4 };
  // Cache ops, applied by rank 0 while it plans (so that its counts of free blocks are true) and
  // replayed in the same order by every other rank: {kFork, dst row, src row}, {kRelease, row, 0}.
  enum Op : int32_t { kFork = 0, kRelease = 1 };
  int64_t flags = 0;
  int64_t beam = 0;  // beam width of the batch after this admission
  std::vector<std::array<int32_t, 3>> ops;
  std::vector<int64_t> preempt, resume;  // slots preempted now, and preempted slots that run again
  std::vector<int64_t> slot, need;       // newcomers: their slots and cache lengths
  std::vector<SoftPrompt> soft;          // newcomers: their soft prompts (rows 0: none)
  // What to run, row by row: a newcomer's first row (its beams fork from it), or each unfinished
  // row of a resumed slot (its history).
  struct Run {
    int32_t row = 0;
    uint8_t append = 0;  // 1: after the row's cached tokens (a resident session); 0: a fresh prefill
    uint8_t score = 0;   // 1: its tokens are scored (ResultOptions::context_log_probs; Engine's ContextScores)
    uint8_t embed = 0;   // 1: their context embedding is wanted (ResultOptions::context_embedding)
    std::vector<int32_t> feed;
  };
  std::vector<Run> runs;
  std::string error;
  // Rank 0 only: the newcomers' requests (decode.input_ids = the whole context) and slot metadata.
  std::vector<Request> requests;
  std::vector<Slot> meta;
  std::vector<GenerationOutput> refused;  // SchedulerOptions::refuse_alone: requests that failed alone
};

}  // namespace ftx
