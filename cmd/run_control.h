#pragma once
// What long-running subcommands (generate, eval-lambada, eval-summarize) share at the command line: a graceful
// stop on SIGTERM/SIGINT and flag values checked with FT's rules.
#include <cstdint>
#include <optional>
#include <string>

#include "formats/output_file.h"
#include "lib/decoding/decoder.h"
#include "lib/engine/generation_output.h"
#include "lib/engine/scheduler.h"

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

// Runs `scheduler` over `source` until it is done or a stop is asked, each result through `ordered`
// (the leader's; null on the other ranks). A failure part way through keeps the results written
// before it in the journal's .partial and says so, with `fix` (what to do) before "run again with
// --resume". Returns the exit code when the run ends here (a stop: 128 + signal; a rank other than
// the leader: 0), else nullopt, with the journal finished.
std::optional<int> run_to_journal(Scheduler& scheduler, RequestSource* source, OrderedResults* ordered,
                                  const StreamCallback& on_token, const StopOnSignal& stop, ResultJournal* journal,
                                  bool leader, const std::string& fix);

// The end of a batch job some of whose results carry an "error" (non-finite logits): the first one's
// message and how many there were on stderr; returns the exit code, 1 (0 when `failed` is 0).
int report_failed_results(int64_t failed, const std::string& first_failure, const std::string& output);

// Checks the flags' request defaults with check_decode_request; a violation is a UsageError naming
// the flag ("--top-p 5 outside [0, 1]").
void check_flags_as_request(const DecodeRequest& probe, int64_t vocab_size);

}  // namespace ftx::cmd
