#include "cmd/batch_job_flags.h"

namespace ftx::cmd {

void add_batch_job_flags(CLI::App* sub, BatchJobFlags& f, const std::string& results, const std::string& inputs) {
  sub->add_option("--output", f.output,
                  results + " in input order (-: stdout); written to OUTPUT.partial as they complete, renamed at the "
                            "end")
      ->required();
  sub->add_flag("--force", f.force, "Replace an existing output (or the .partial of an interrupted run)");
  sub->add_flag("--resume", f.resume, "Continue an interrupted run from OUTPUT.partial (same " + inputs + ")");
  sub->add_option("--batch-size", f.batch_size, "Requests decoded together (default 16)");
  sub->add_option("--batching", f.batching,
                  "continuous (default): a finished request's rows take the next request at once; static: a batch "
                  "waits for its longest request")
      ->check(CLI::IsMember({"continuous", "static"}));
}

}  // namespace ftx::cmd
