#pragma once
// What long-running subcommands (generate, eval-lambada) share at the command line: a graceful
// stop on SIGTERM/SIGINT and flag values checked with FT's rules.
#include <cstdint>
#include <string>

#include "formats/output_file.h"
#include "lib/decoding/decoder.h"

namespace ftx::cmd {

// While alive, the first SIGTERM or SIGINT only sets a flag (the job stops after the results it has
// written, which are all on disk); a second one ends the process at once (the default action).
class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  bool requested() const;
  // Tells where the results are and how to continue; returns the exit code (128 + signal).
  int report(const ResultJournal* journal) const;
};

// Checks the flags' request defaults with check_decode_request; a violation is a UsageError naming
// the flag ("--top-p 5 outside [0, 1]").
void check_flags_as_request(const DecodeRequest& probe, int64_t vocab_size);

}  // namespace ftx::cmd
