#pragma once
// The flags of a batch job that writes one JSON line per input in input order (generate,
// eval-summarize): where the results go, whether an old output is replaced or an interrupted run
// continued, and how many requests are decoded together. One definition, so the jobs cannot drift.
#include <cstdint>
#include <string>

#include "cmd/subcommand.h"

namespace ftx::cmd {

struct BatchJobFlags {
  std::string output;
  bool force = false;
  bool resume = false;
  int64_t batch_size = 16;
  std::string batching = "continuous";
};

// --output (required; `results` says what the lines hold: "Results, one JSON line per prompt"), --force, --resume (`inputs`: what must be
// the same to continue, "model, prompts, options"), --batch-size and --batching.
void add_batch_job_flags(CLI::App* sub, BatchJobFlags& f, const std::string& results, const std::string& inputs);

}  // namespace ftx::cmd
